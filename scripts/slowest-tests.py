#!/usr/bin/env python3
"""Print the slowest tests of cargo-nextest's JUnit reports.

Usage: slowest-tests.py N REPORT.xml [REPORT.xml ...]
"""
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    n = int(sys.argv[1])
    cases = []
    for path in sys.argv[2:]:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"slowest-tests: {path}: {e}", file=sys.stderr)
            continue
        for case in root.iter("testcase"):
            failed = case.find("failure") is not None or case.find("error") is not None
            cases.append((float(case.get("time", "0")), case.get("classname", ""),
                          case.get("name", ""), failed))
    cases.sort(reverse=True)
    total = sum(c[0] for c in cases)
    print(f"the {min(n, len(cases))} slowest of {len(cases)} tests "
          f"({total:.0f} s of test time in all):")
    for secs, binary, name, failed in cases[:n]:
        print(f"  {secs:7.1f} s  {binary} {name}{'  FAILED' if failed else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
