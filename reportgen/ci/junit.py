"""Budget checks as a JUnit XML report: every CI system shows breaches as failed tests.

One test case per run and budget (`classname` the run, `name` the budget's
key): a breach is a failure, a check that could not be made (a run without
steps) is skipped, a check within budget passes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from reportgen.compare.budget import NOT_CHECKED, OVER, CheckResult

SUITE = "reportgen budgets"
# XML 1.0 cannot hold most control characters, even escaped; a run folder's name can.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_xml(result: CheckResult) -> bytes:
    failures = len(result.violations)
    skipped = len(result.unchecked)
    counts = {"tests": str(len(result.outcomes)), "failures": str(failures), "errors": "0", "skipped": str(skipped)}
    suites = ET.Element("testsuites", {"name": "reportgen check", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": SUITE, **counts})
    for outcome in result.outcomes:
        case = ET.SubElement(suite, "testcase", {"classname": _xml_text(outcome.run), "name": outcome.budget})
        message = _xml_text(outcome.message)
        if outcome.status == OVER:
            ET.SubElement(case, "failure", {"message": message, "type": "budget exceeded"}).text = message
        elif outcome.status == NOT_CHECKED:
            ET.SubElement(case, "skipped", {"message": message})
        else:
            ET.SubElement(case, "system-out").text = message
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


__all__ = ["SUITE", "junit_xml"]
