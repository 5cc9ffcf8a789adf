"""The runs table's `words` filter renders what the template macro it replaced rendered."""

from __future__ import annotations

import jinja2
from hypothesis import given
from hypothesis import strategies as st

from assay_viewer.pages import view_environment

MACRO = (
    '{% macro words(names) %}{% for n in names | sort %}<span class="word">'
    "{% for w in n.split('_') %}{{ w }}{% if not loop.last %}_<wbr>{% endif %}{% endfor %}"
    "</span>{{ ', ' if not loop.last }}{% endfor %}{% endmacro %}{{ words(names) }}"
)
_MACRO = jinja2.Environment(autoescape=True).from_string(MACRO)
_FILTER = view_environment().from_string("{{ names | words }}")


def test_names_break_after_underscores_sorted_and_escaped() -> None:
    names = ["overclaiming", "Analysis_not_executed", "<script>_x"]
    out = _FILTER.render(names=names)
    assert out == (
        '<span class="word">&lt;script&gt;_<wbr>x</span>, '
        '<span class="word">Analysis_<wbr>not_<wbr>executed</span>, '
        '<span class="word">overclaiming</span>'
    )


@given(st.lists(st.text(alphabet="ab_<&\"' B", max_size=8), max_size=5))
def test_the_filter_renders_what_the_macro_did(names: list[str]) -> None:
    assert _FILTER.render(names=names) == _MACRO.render(names=names)
