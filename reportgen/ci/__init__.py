"""What CI systems read from reportgen: GitHub annotations (`annotations.py`), JUnit and GitLab Code
Quality reports (`junit.py`, `codequality.py`), the job's step summary (`step_summary.py`), and the
marker and links of a sticky pull-request comment (`sticky_comment.py`; the comment's body is
`reportgen.compare.pr_summary`'s). Fed by `reportgen.compare`'s budget check; written by `reportgen.cli`."""
