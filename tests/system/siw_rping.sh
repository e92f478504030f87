#!/usr/bin/env bash
# rping over kernel siw: 100 ping-pongs on siw0 with data verification (-V) on both sides.
# Proves rdma_cm + iWARP connection setup, SEND/RECV and RDMA READ/WRITE in the VM.
# needs: siw
source "$UIW_ROOT/tests/system/lib.sh"

rping_pair siw0 "$SIW0_ADDR" "" 7174 100 64
