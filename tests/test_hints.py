"""A hint as data (areal_conf.hints): it reads as written, its overrides are spelled for a
config without reading the words, and fixes left out take their separators along."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from areal_conf.errors import AllocationError
from areal_conf.hints import Hint, as_hint, either, fix, sentence, shell_quote

HINT = either(
    fix("a.b=1", lead="e.g. ", remark=" (the default)"),
    ", or ",
    sentence("add nodes (", fix("cluster.n_nodes=2"), ")"),
    "; ",
    "or shrink a layout",
)


def test_it_reads_as_written() -> None:
    assert (
        HINT.text()
        == "e.g. a.b=1 (the default), or add nodes (cluster.n_nodes=2); or shrink a layout"
    )
    assert str(HINT) == HINT.text()


def test_spelling_reaches_fixes_and_examples_alike() -> None:
    spelled = HINT.spelled(lambda o: "++" + o)
    assert spelled.text() == (
        "e.g. ++a.b=1 (the default), or add nodes (++cluster.n_nodes=2); or shrink a layout"
    )


def test_fixes_and_what_the_hint_suggests() -> None:
    assert [(i, f.overrides) for i, f in HINT.fixes()] == [(0, ("a.b=1",))]
    assert HINT.suggested() == [("a.b=1",), ("cluster.n_nodes=2",)]


def test_an_option_left_out_takes_its_separator_and_the_first_left_loses_its_or() -> None:
    assert HINT.kept([1, 2], {}).text() == "add nodes (cluster.n_nodes=2); or shrink a layout"
    assert HINT.kept([2], {}).text() == "shrink a layout"
    assert HINT.kept([0, 2], {0: fix("a.b=2")}).text() == "a.b=2; or shrink a layout"


def test_built_up() -> None:
    hint = Hint(()).then("; ", fix("x=1")).then("; ", "words").with_tail(" (tail)")
    assert hint.text() == "x=1; words (tail)"
    assert hint.led("try: ").text() == "try: x=1; words (tail)"
    assert as_hint("words").text() == "words"


def test_quoted_fixes_are_one_shell_word_each_but_a_deletion() -> None:
    quoted = fix("~old.key", "++new.key='megatron:(attn:d4|ffn:e4)'", quoted=True)
    assert quoted.text() == "~old.key \"++new.key='megatron:(attn:d4|ffn:e4)'\""
    assert shell_quote("a=1") == "a=1"


def test_an_error_prints_its_hint_and_keeps_it_as_data() -> None:
    err = AllocationError("bad", hint=HINT)
    assert err.hint == HINT.text()
    assert err.advice == HINT
    assert f"hint: {HINT.text()}" in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert again.advice == HINT and str(again) == str(err)
    assert AllocationError("bad", hint="words").advice is None


WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
OVERRIDE = st.from_regex(r"[a-z]{1,5}(\.[a-z]{1,5}){0,2}=[a-z0-9:]{1,6}", fullmatch=True)
OPTION = st.one_of(
    WORDS,
    st.builds(
        lambda o, lead, remark: fix(*o, lead=lead, remark=remark),
        st.lists(OVERRIDE, min_size=1, max_size=3),
        WORDS,
        WORDS,
    ),
    st.builds(lambda a, o, b: sentence(a, fix(o), b), WORDS, OVERRIDE, WORDS),
)


@given(st.lists(st.tuples(OPTION, WORDS), min_size=1, max_size=5), WORDS)
def test_any_hint_renders_and_keeps_every_option_it_is_told_to(
    items: list[tuple[object, str]], tail: str
) -> None:
    options = [o for o, _ in items]
    separators = [s for _, s in items[1:]]
    hint = Hint(tuple(options), tuple(separators), tail)  # type: ignore[arg-type]
    text = hint.text()
    assert text.endswith(tail)
    assert hint.spelled(lambda o: o).text() == text
    assert hint.kept(list(range(len(options))), {}).text() == text
    assert len(hint.suggested()) <= sum(1 for _ in hint.fixes()) + len(options)
