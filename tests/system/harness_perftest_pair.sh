#!/usr/bin/env bash
# The harness's perftest_pair (lib.sh), with stand-in tools: a pair reruns once when either side
# failed perftest's clock calibration (a server that failed so while its client succeeded used
# to fail sctp_perftest beside a CPU hog) or printed the calibration failure and exited 0, and
# not for any other failure; pair_exits_ok judges both sides, accepting perftest's iWARP leak
# only when asked.
# timeout: 120
source "$UIW_ROOT/tests/system/lib.sh"

# fake ROLE PORT: fails as the file "fail-ROLE" says, once ("clock": perftest's calibration
# message and exit 1; "clock0": the message and exit 0, as with -F; "other": exit 3; "leak":
# perftest's leak message and exit 1).
cat >fake <<'TOOL'
#!/usr/bin/env bash
echo "$1 on port $2"
f=fail-$1
[ -f "$f" ] || exit 0
how=$(cat "$f")
rm -f "$f"
case $how in
clock) echo " Correlation coefficient r^2: 0.69 < 0.9" && echo " Can't produce a report" && exit 1 ;;
clock0) echo " Correlation coefficient r^2: 0.69 < 0.9" && exit 0 ;;
leak) echo " Failed to deallocate PD - Device or resource busy" && exit 1 ;;
*) exit 3 ;;
esac
TOOL
chmod +x fake
no_wait() { :; }

# run_case NAME SIDE HOW: one pair with SIDE set to fail HOW on its first run.
run_case() {
  rm -f fail-*
  [ "$2" = none ] || echo "$3" >"fail-$2"
  perftest_pair "$1" no_wait 100 ./fake server @PORT@ -- ./fake client @PORT@
}

for side in server client; do
  for how in clock clock0; do
    run_case "$how-$side" $side $how
    [ "${PAIR_RC[client]}${PAIR_RC[server]}" = 00 ] || fail "$how-$side: exits ${PAIR_RC[*]} after the rerun"
    [ "$PAIR_PORT" = 101 ] || fail "$how-$side: the rerun used port $PAIR_PORT, not 101"
    expect "$how-$side-$side" "$side on port 101" "$how-$side: no rerun on port 101"
    (pair_exits_ok "$how-$side") || fail "$how-$side: pair_exits_ok refused a clean rerun"
  done
  PAIR_RERUN_OFFSET=1000 run_case "offset-$side" $side clock
  [ "$PAIR_PORT" = 1100 ] || fail "offset-$side: the rerun used port $PAIR_PORT, not 1100"

  run_case "other-$side" $side other
  if [ "${PAIR_RC[$side]}" != 3 ] || [ "$PAIR_PORT" != 100 ]; then
    fail "other-$side: a failure other than the calibration was rerun (port $PAIR_PORT, exits ${PAIR_RC[*]})"
  fi
  if (pair_exits_ok "other-$side") >/dev/null 2>&1; then fail "other-$side: pair_exits_ok accepted exit 3"; fi

  run_case "leak-$side" $side leak
  [ "${PAIR_RC[$side]}" = 1 ] || fail "leak-$side: exit ${PAIR_RC[$side]}"
  (pair_exits_ok "leak-$side" leak) || fail "leak-$side: perftest's leak refused with 'leak'"
  if (pair_exits_ok "leak-$side") >/dev/null 2>&1; then fail "leak-$side: the leak accepted without 'leak'"; fi
done
echo "PASS: perftest_pair reruns calibration failures of either side, and only those"
