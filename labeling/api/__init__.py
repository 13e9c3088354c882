"""The REST API (DRF): projects, queries, passages and pairs; the label queue, labels and undo; judges, scoring
jobs and definitions; the validation report and metrics by definition; token login. The same selectors and
services as the HTML pages, with the same access rule (selectors.projects.project_for_user)."""
