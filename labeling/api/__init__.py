"""The read-only REST API: the same selectors as the HTML pages, rendered as JSON."""
