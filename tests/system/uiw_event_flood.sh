#!/usr/bin/env bash
# needs: uiw
# timeout: 900
# Bounded kernel memory for uiw.ko's event methods (providers/uiw/tests/uiw_event_flood.c): an
# unprivileged user (nobody) calls each event method UIW_EVENT_FLOOD_N times (default 2*10^6):
# CQ_SIGNAL without an arm (and N/10 times after one arm), QP_EVENT (QP fatal, last WQE, SQ
# drained), CQ_EVENT (CQ error), SRQ_EVENT (SRQ limit, SRQ error), and never reads an event:
# exactly the due events are accepted (one per arm, per state change, per armed limit), they
# are delivered, and the kernel's unreclaimable slab grows by less than 8 MiB per burst. Before
# the bound every call queued a 64-byte event: 10^7 calls held 640 MB of kernel memory. The
# default is the smallest count whose smallest burst (N/10 calls after one arm) would still have
# queued more than the 8 MiB allowed (12 MiB); about 30 s under TCG (280000 calls a second).
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_event_flood event_flood
chmod 755 . event_flood
run_fg flood 800 setpriv --reuid=nobody --regid=nogroup --clear-groups \
  ./event_flood "$UIW0_DEV" "${UIW_EVENT_FLOOD_N:-2000000}"
show flood
expect flood '^PASS$'
