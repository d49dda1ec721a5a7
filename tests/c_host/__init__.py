"""A minimal C host (``host.c``) for native FMUs and its Python driver (``run.py``)."""
