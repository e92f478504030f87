#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# Concurrent RTR modifies of one QP (providers/uiw/tests/uiw_rtr_race_check.c): 50 rounds of two
# threads sending the same responder RTR through uverbs at once, then RESET and destroy. uiw.ko
# re-checks the QP's connect-on-RTR claim under the lock it commits under; before, both threads
# passed the unlocked check, each took a reference on the RTR service listener and one
# reference was lost, so the listener stayed on rtr_port after every QP was gone. About 15 s.
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_rtr_race_check rtr_race
service=$(cat /sys/module/uiw/parameters/rtr_port)
before=$(ss -Hltn "sport = :$service")
[ -z "$before" ] || fail "something listens on the RTR service port before the test: $before"
run_fg race 240 ./rtr_race "$UIW0_DEV" 50
show race
expect race '^PASS$'
left=$(ss -Hltn "sport = :$service")
[ -z "$left" ] || fail "the RTR service still listens with every QP gone: $left"
log "PASS: no RTR listener left after 50 rounds of concurrent RTR modifies"
