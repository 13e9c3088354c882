"""HTML pages, one module per screen family; labeling/urls.py maps them."""
