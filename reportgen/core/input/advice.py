"""XProf's input-pipeline wording: the summary's next step and the host-side
recommendations (docs/xprof/input_pipeline.md §2.4, §4.5), verbatim.

XProf writes these as HTML with links. They are kept verbatim here (parity
tests compare them) and turned into plain (text, link) segments for pages, so
that no template ever marks markup safe.
"""

from __future__ import annotations

import re

TF_DATA_GUIDE = "https://www.tensorflow.org/guide/data"
_API = "https://www.tensorflow.org/api_docs/python/tf/data"


def _link(href: str, label: str) -> str:
    return f'<a href="{href}" target="_blank">{label}</a>'


NEXT_STEP_NO_TF_DATA = (
    f"Consider using {_link(TF_DATA_GUIDE, 'the tf.data API')} to enable profiler's host-side analysis for input "
    "pipeline. Profiler currently does not support custom input pipeline (please ignore Section 3 below)."
)
NEXT_STEP_HOST_SIDE = "Look at Section 3 for the breakdown of input time on the host."
NEXT_STEP_SKIP = "You may skip the rest of this page."

# The recommendation table: always these five rows, in this order.
RECOMMENDATIONS = [
    "Enqueuing data: you may want to combine small input data chunks into fewer but larger chunks.",
    f"Data preprocessing: you may increase num_parallel_calls in {_link(_API + '/Dataset#map', 'Dataset map()')} "
    "or preprocess the data OFFLINE.",
    "Reading data from files in advance: you may tune parameters in the following tf.data API "
    f"({_link(_API + '/Dataset#prefetch', 'prefetch size')}, "
    f"{_link(_API + '/Dataset#interleave', 'interleave cycle_length')}, "
    f"{_link(_API + '/TFRecordDataset#class_tfrecorddataset', 'reader buffer_size')})",
    "Reading data from files on demand: you should read data IN ADVANCE using the following tf.data API "
    f"({_link(_API + '/Dataset#prefetch', 'prefetch')}, {_link(_API + '/Dataset#interleave', 'interleave')}, "
    f"{_link(_API + '/TFRecordDataset#class_tfrecorddataset', 'reader buffer')})",
    "Other data reading or processing: you may consider using the "
    f"{_link('https://www.tensorflow.org/programmers_guide/datasets', 'tf.data API')} (if you are not using it now)",
]

_ANCHOR = re.compile(r'<a href="([^"]*)" target="_blank">(.*?)</a>')


def summary_next_step(classification: str, uses_tf_data: bool) -> str:
    """XProf's GetSummaryNextStep (HTML, verbatim)."""
    if classification in ("host", "both"):
        return NEXT_STEP_HOST_SIDE if uses_tf_data else NEXT_STEP_NO_TF_DATA
    return NEXT_STEP_SKIP


def link_segments(html: str) -> list[tuple[str, str | None]]:
    """XProf's text with links as (text, href or None) segments, in order."""
    out: list[tuple[str, str | None]] = []
    at = 0
    for match in _ANCHOR.finditer(html):
        if match.start() > at:
            out.append((html[at:match.start()], None))
        out.append((match.group(2), match.group(1)))
        at = match.end()
    if at < len(html):
        out.append((html[at:], None))
    return out


def plain_text(html: str) -> str:
    """XProf's text with the links reduced to their labels."""
    return "".join(text for text, _ in link_segments(html))


# XProf's wording refers to its own UI ("Section 3" of its input pipeline page, a page the reader may skip). Pages
# of this site say it in their own terms; parity tests keep comparing the verbatim text above.
_ON_INPUT_PAGE = {
    NEXT_STEP_HOST_SIDE: "The host-side section below breaks the input time down.",
    NEXT_STEP_SKIP: "",
    "please ignore Section 3 below": "please ignore the host-side section below",
}
_ON_OTHER_PAGES = {
    NEXT_STEP_HOST_SIDE: "The input pipeline page breaks the input time on the host down.",
    NEXT_STEP_SKIP: "",
    "please ignore Section 3 below": "please ignore the input pipeline page's host-side section",
    "(especially Section 3 for the breakdown of input operations on the Host)":
        "(especially its host-side section: the input operations on the host)",
}


def in_our_words(text: str, on_input_page: bool) -> str:
    """XProf's sentence with its references to XProf's own page layout replaced (empty when nothing remains)."""
    for theirs, ours in (_ON_INPUT_PAGE if on_input_page else _ON_OTHER_PAGES).items():
        text = text.replace(theirs, ours)
    return text.strip()
