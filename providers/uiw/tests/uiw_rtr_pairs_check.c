// uiw_rtr_pairs_check DEV ROUNDS: ROUNDS times, two QPs of DEV in one process connected on RTR
// (uiw_pair.h: the first QP, the initiator, moves to RTR before its responder listens), one Send
// verified byte for byte, both torn down. Run by tests/system/uiw_rtr_self_connect.sh with the
// initiator's source ports narrowed to the service port and a few beside it.
#include "uiw_pair.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DEV ROUNDS\n", argv[0]);
    return 2;
  }
  const int rounds = atoi(argv[2]);
  for (int i = 0; i < rounds; ++i) {
    struct end a, b;
    open_end(&a, argv[1], 0);
    open_end(&b, argv[1], 0);
    post_recv(&b, 1);
    fill(&a, (uint8_t)i);
    connect_pair(&a, &b);
    if (post_send(&a, 2, IBV_WR_SEND, NULL, 0)) die("round %d: post Send", i);
    expect_wc(&a, 2, IBV_WC_SUCCESS, "Send");
    expect_wc(&b, 1, IBV_WC_SUCCESS, "Receive");
    same(&a, &b, "Send");
    close_end(&a);
    close_end(&b);
    printf("ok: round %d: QP %s pair connected on RTR, Send verified\n", i, argv[1]);
  }
  puts("PASS");
  return 0;
}
