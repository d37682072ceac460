"""The TF-IDF job's own processors under TestSupport, and its document readers.

StopwordsP, TokenizeP, TfP and TfIdfP all hold state (whether the set was sent, the stopword
set, the term frequencies), so every verification runs with snapshots on, including a rescaled
restore where the processor sits behind a partitioned edge.
"""

from __future__ import annotations

import logging
import math
import tracemalloc

import pytest

from jetspark.core.test_support import TestSupport
from jetspark.core.test_support.boxes import TestInbox, TestOutbox, TestProcessorContext
from jetspark.processors.tfidf import StopwordsP, TfIdfP, TfP, TokenizeP
from jetspark.processors.tfidf.dag import word_of
from jetspark.processors.tfidf.processors import PIECE_CHARS, DocLines, DocWords
from jetspark.processors.tfidf.tokenize import Tokenizer

STOPWORDS = frozenset({"the", "a", "of"})
LINES = [(1, "The quick fox"), (2, "A fox, of course: the END."), (3, ""), (1, "Quick!")]
TOKENS = [(1, "quick"), (1, "fox"), (2, "fox"), (2, "course"), (2, "end"), (1, "quick")]


def verify(supplier: object) -> TestSupport:
    """Quiet TestSupport for `supplier`."""
    return TestSupport.verify_processor(supplier).disable_logging()


def doc_id_of(item: tuple[int, str]) -> int:
    """The rescaling key of tokenize's lines and tokens: the document."""
    return item[0]


def test_stopwords_p_emits_the_set_once():
    verify(lambda: StopwordsP(["the", "a", "the"])).expect_output([frozenset({"the", "a"})])


def test_tokenize_p_splits_lowercases_and_drops_stopwords():
    verify(TokenizeP).inputs([[STOPWORDS], LINES], priorities=[-1, 0]).expect_output(TOKENS)


def test_tokenize_p_keeps_its_stopwords_across_a_rescaled_restore():
    verify(TokenizeP).inputs([[STOPWORDS], LINES], priorities=[-1, 0]).output_checker(
        TestSupport.SAME_ITEMS_ANY_ORDER
    ).restore_rescaled(2, 3, [None, doc_id_of]).expect_output(TOKENS)


def test_tokenize_p_unicode_keeps_non_ascii_letters():
    verify(lambda: TokenizeP("unicode")).inputs(
        [[frozenset()], [(7, "Größe café")]], priorities=[-1, 0]
    ).expect_output([(7, "größe"), (7, "café")])


def test_tokenize_p_fails_clearly_on_a_line_before_the_stopwords():
    with pytest.raises(RuntimeError, match="before the stopword set"):
        verify(TokenizeP).inputs([[STOPWORDS], LINES], priorities=[1, 0]).expect_output(TOKENS)


def as_postings(items: list[tuple[str, list[int]]]) -> dict[str, dict[int, int]]:
    """tf's `(word, [doc id, tf, ...])` items as word -> {doc id: tf}; a word's postings may
    come in several items (from several tf processors), never a document twice."""
    postings: dict[str, dict[int, int]] = {}
    for word, doc_tfs in items:
        for doc_id, tf in zip(doc_tfs[::2], doc_tfs[1::2], strict=True):
            assert doc_id not in postings.setdefault(word, {}), (word, doc_id)
            postings[word][doc_id] = tf
    return postings


def same_postings(expected: list, actual: list) -> bool:
    return as_postings(expected) == as_postings(actual)


def test_tf_p_counts_each_word_per_document_and_groups_the_counts_by_word():
    verify(TfP).output_checker(same_postings).input(TOKENS).expect_output(
        [("quick", [1, 2]), ("fox", [1, 1, 2, 1]), ("course", [2, 1]), ("end", [2, 1])]
    )


def test_tf_p_restores_rescaled_by_document_and_word():
    tokens = [(doc_id, word) for doc_id in range(5) for word in ("a", "b", "a")[: doc_id + 1]]
    verify(TfP).output_checker(same_postings).input(tokens).restore_rescaled(
        2, 3, lambda token: token
    ).restore_rescaled(3, 1, lambda token: token).expect_output(
        [("a", [0, 1, 1, 1, 2, 2, 3, 2, 4, 2]), ("b", [1, 1, 2, 1, 3, 1, 4, 1])]
    )


def test_tf_p_saves_the_postings_it_has_not_emitted_yet_while_completing():
    """An engine snapshots a processor whose inputs are done while its complete() is still
    emitting: the snapshot holds exactly the counts of the words not emitted yet."""
    tf, outbox = TfP(), TestOutbox(1)
    tf.init(outbox, TestProcessorContext())
    tf.process(0, TestInbox().add_all(TOKENS))
    assert tf.complete() is False
    emitted: list = []
    outbox.drain_queue(0, emitted)
    assert tf.save_to_snapshot() is True
    saved: list = []
    outbox.drain_snapshot_queue(saved)
    restored, outbox = TfP(), TestOutbox(10)
    restored.init(outbox, TestProcessorContext())
    for key, value in saved:
        restored.restore_from_snapshot_entry(key, value)
    assert restored.complete() is True
    outbox.drain_queue(0, emitted)
    assert len(emitted) == 4  # each word once: the emitted one was not saved
    assert as_postings(emitted) == as_postings(
        [("quick", [1, 2]), ("fox", [1, 1, 2, 1]), ("course", [2, 1]), ("end", [2, 1])]
    )


TF = [
    ("jet", [0, 2, 1, 1]),
    ("spark", [0, 3]),
    ("every", [0, 1, 1, 4]),
    ("every", [2, 1]),  # from another tf processor
]


def expected_tf_idf(document_count: int) -> list[tuple[str, list[tuple[int, float]]]]:
    """TF * IDF for TF, written out by hand; IDF = ln D - ln DF as the manual computes it."""
    log_d = math.log(document_count)
    return [
        ("jet", [(0, 2 * (log_d - math.log(2))), (1, 1 * (log_d - math.log(2)))]),
        ("spark", [(0, 3 * (log_d - math.log(1)))]),
        ("every", [(0, 0.0), (1, 0.0), (2, 0.0)]),
    ]


def same_index_entries(expected: list, actual: list) -> bool:
    """Equal as word -> {doc id: score} maps, scores to 1e-12, in any order."""

    def as_map(entries: list) -> dict[str, dict[int, float]]:
        return {word: dict(postings) for word, postings in entries}

    want, got = as_map(expected), as_map(actual)
    return (
        len(actual) == len(expected)
        and want.keys() == got.keys()
        and all(
            want[w].keys() == got[w].keys()
            and all(math.isclose(want[w][d], got[w][d], abs_tol=1e-12) for d in want[w])
            for w in want
        )
    )


def test_tf_idf_p_scores_tf_times_ln_d_over_df_and_keeps_idf_zero_words():
    verify(TfIdfP).inputs([[3], TF], priorities=[-1, 0]).output_checker(
        same_index_entries
    ).expect_output(expected_tf_idf(3))


def test_tf_idf_p_with_a_stopword_fraction_sends_frequent_words_to_ordinal_1():
    """'every' is in all 3 documents, 'jet' in 2: above 0.5 * 3 both are stopwords; the outbox
    of TestSupport refuses every other item, so each ordinal's refused items are retried."""
    verify(lambda: TfIdfP(0.5)).inputs([[3], TF], priorities=[-1, 0]).outputs(
        [expected_tf_idf(3)[1:2], [("every", 3), ("jet", 2)]]
    )


def test_tf_idf_p_restores_rescaled_by_word():
    verify(TfIdfP).inputs([[3], TF], priorities=[-1, 0]).output_checker(
        same_index_entries
    ).restore_rescaled(2, 3, [None, word_of]).restore_rescaled(3, 1, [None, word_of]).expect_output(
        expected_tf_idf(3)
    )


def test_tf_idf_p_without_a_document_count_fails_clearly():
    with pytest.raises(RuntimeError, match="no document count"):
        verify(TfIdfP).inputs([[], TF]).expect_output([])


def test_doc_lines_reads_utf8_with_errors_replaced_and_keeps_the_bom(tmp_path):
    (tmp_path / "d.txt").write_bytes(b"\xef\xbb\xbfcaf\xc3\xa9\r\nbad \xff byte\n")
    pieces = list(DocLines(str(tmp_path))(logging.getLogger("t"), (4, "d.txt")))
    assert pieces == [(4, "\ufeffcafé\nbad \ufffd byte\n")]


@pytest.mark.parametrize(
    "text",
    [
        "word " * 100_000,  # one long line of spaces and words
        ("alpha,beta;" * 30_000) + "\n" + "tail",  # no space: cut at punctuation
        "short line\n" * 20_000,  # many lines: pieces of whole lines
        "x" * 200_000 + " end",  # one word longer than a piece is kept whole
    ],
    ids=["long line", "punctuation only", "many lines", "huge word"],
)
def test_doc_lines_reads_bounded_pieces_that_never_split_a_word(tmp_path, text):
    (tmp_path / "d.txt").write_text(text, encoding="utf-8")
    pieces = [p for _, p in DocLines(str(tmp_path))(logging.getLogger("t"), (0, "d.txt"))]
    assert "".join(pieces) == text
    assert [w for p in pieces for w in Tokenizer().words(p)] == Tokenizer().words(text)
    longest_word = max(map(len, Tokenizer().words(text)))
    assert max(map(len, pieces)) <= 2 * PIECE_CHARS + longest_word


def test_one_long_line_is_tokenized_in_bounded_memory(tmp_path):
    """Issue 17.11: a 2.7 MB document without a line break; reading and tokenizing it piece by
    piece keeps Python's allocations to a few pieces (a line at a time took over 30 MB)."""
    (tmp_path / "d.txt").write_text("lorem ipsum dolor sit amet " * 100_000, encoding="utf-8")
    tokenizer = Tokenizer()
    tracemalloc.start()
    try:
        words = sum(
            len(tokenizer.words(piece))
            for _, piece in DocLines(str(tmp_path))(logging.getLogger("t"), (0, "d.txt"))
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert words == 500_000
    assert peak < 4_000_000


def test_doc_words_are_the_distinct_tokens(tmp_path):
    (tmp_path / "d.txt").write_text("Jet jet JET\nspark, jet\n", encoding="utf-8")
    assert DocWords(str(tmp_path))(logging.getLogger("t"), (0, "d.txt")) == {"jet", "spark"}


def test_a_document_that_vanished_is_logged_not_fatal(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert list(DocLines(str(tmp_path))(logging.getLogger("t"), (0, "gone.txt"))) == []
    assert "'gone.txt' could not be read" in caplog.text
