"""Prints one line per failed/errored unittest case of a verbose unittest log: the test and the
last line of its traceback (the assertion or exception), for the system-test summaries."""
import re
import sys

text = open(sys.argv[1], errors="replace").read()
for block in re.split(r"^={70}$", text, flags=re.M):
    m = re.search(r"^(FAIL|ERROR): (\S+) \((\S+)\)", block, re.M)
    if not m:
        continue
    tb = (block.split("-" * 70) + [""])[1]
    lines = [l for l in tb.strip().splitlines() if l.strip()]
    # The assertion message can span lines: keep from the first "Error" line on.
    start = next((i for i, l in enumerate(lines) if re.match(r"^\w*(Error|Exception)", l)),
                 len(lines) - 1)
    msg = " | ".join(lines[start:])[:int(sys.argv[2]) if len(sys.argv) > 2 else 400]
    print(f"  {m.group(1)} {m.group(3)}: {msg}")
