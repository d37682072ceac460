"""The error of bad input to the TF-IDF job, which the command line reports with exit code 2."""

from __future__ import annotations


class InputError(ValueError):
    """Input the job cannot use: a missing or empty corpus, a bad stopwords or index file."""
