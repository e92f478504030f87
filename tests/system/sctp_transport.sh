#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# The SCTP unit tests (tests/unit/transport/sctp_stream_test.cpp: SctpStream over real
# loopback associations, two engine Qps in SCTP mode over runtime::Connection) need kernel
# SCTP, which the build host lacks: they skip there and run here, none of them skipped.
source "$UIW_ROOT/tests/system/lib.sh"

bin=$UIW_BUILD/tests/uiw_unit_transport
[ -x "$bin" ] || fail "$bin missing: cmake --build \$UIW_BUILD --target uiw_unit_transport"
modprobe sctp || fail "the VM kernel has no sctp module"
run_fg unit 240 "$bin" --gtest_filter='Sctp*' --gtest_brief=0
show unit
expect unit '^\[  PASSED  \] [1-9][0-9]* tests?\.' "no SCTP unit test passed"
if grep -q '^\[  SKIPPED \]' unit.log; then fail "SCTP unit tests skipped although sctp is loaded"; fi
log "SCTP unit tests: $(grep -E '^\[  PASSED  \]' unit.log)"
