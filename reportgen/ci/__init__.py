"""What CI systems read from reportgen: GitHub annotations, JUnit and GitLab Code
Quality reports, the job's step summary, and the body of a sticky pull-request comment."""
