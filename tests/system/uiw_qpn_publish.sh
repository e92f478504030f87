#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# A QP is findable by number only once create_qp can no longer fail
# (providers/uiw/tests/uiw_qpn_publish_check.c): while a create_qp stalls in copying its driver
# response (a userfaultfd page), rdma_connect naming the number that QP gets must be refused
# (EINVAL); the copy is then made to fail (EFAULT). uiw.ko used to publish the QP before that
# copy and, when it failed, free the QP under the reference iw_cm had taken meanwhile. About 10 s.
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_qpn_publish_check qpn_publish
# The id connects to its own address: nothing listens on the port, so the live QP's connect
# attempt fails later, which is not checked. (Resolving uiw0's address from uiw1's timed out,
# ADDR_ERROR -110, when this ran first in a boot.)
run_fg publish 120 ./qpn_publish "$UIW1_ADDR" "$UIW1_ADDR" 7801
show publish
expect publish "^id on $UIW1_DEV\$" "the rdma_cm id is not on $UIW1_DEV"
expect publish '^PASS$'
