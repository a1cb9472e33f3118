"""Learner-facing text in English and Chinese, through gettext.

English msgids are the source text; the Chinese lives in grader/locale/zh/LC_MESSAGES/attn_kata.po
(compiled to attn_kata.mo next to it).

Translate at the edge: the core (engine, runner, checks, diagnoses, flags, pictures) takes no language. It runs
under `deferred()`, where _() gives a `Text`: a msgid with its parameters (and parts joined: `join`, +), whose str
is the English text. A report is worded for its reader by `Report.worded(lang)` (grader.report); a renderer words
its own text in the reader's language, a context variable that the CLI sets once (`set_lang`) and a renderer that
takes `lang=` sets for its block (`using(lang)`).

    _("text {n}").format(n=3)   translate now, in the current language (a Text under deferred())
    N_("text")                  mark for extraction only; translate later with _()

Updating the catalogue: see CONTRIBUTING.md, "Translations" (pybabel extract -> update -> translate -> compile).
The worker never imports a language: probes and the worker send msgids with parameters
(`Msg`), and the trusted side formats them.
"""

from __future__ import annotations

import contextlib
import functools
import gettext
import locale
import math
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

DOMAIN = "attn_kata"
LOCALEDIR = Path(__file__).resolve().parent / "locale"
LANGS = ("en", "zh")

_current: ContextVar[str] = ContextVar("attn_kata_lang", default="en")
# the core (engine, runner, checks, diagnoses, flags) words nothing: under `deferred()`, _() and its kin return
# `Text`, a message that a renderer words in its reader's language (`word`, Report.worded)
_deferred: ContextVar[bool] = ContextVar("attn_kata_deferred", default=False)


def normalise(lang: str | None) -> str:
    """'zh', 'zh_CN.UTF-8', 'zh-Hans' -> 'zh'; anything else -> 'en'."""
    return "zh" if (lang or "").lower().startswith("zh") else "en"


def default_lang() -> str:
    """The learner's language from the environment: ATTN_KATA_LANG, then the locale (LC_ALL, LC_MESSAGES, LANG)."""
    for var in ("ATTN_KATA_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var, "")
        if value:
            return normalise(value)
    return normalise(locale.getlocale()[0] or "")


def current() -> str:
    return _current.get()


def set_lang(lang: str | None) -> None:
    """Set the language for the rest of this context (the CLI calls it once)."""
    _current.set(normalise(lang))


@contextlib.contextmanager
def using(lang: str | None) -> Iterator[str]:
    """Run a block in `lang`; None keeps the current language."""
    if lang is None:
        yield current()
        return
    token = _current.set(normalise(lang))
    try:
        yield current()
    finally:
        _current.reset(token)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Run a block that words nothing: _(), fmt(), translate(None, ...), status() and the step titles return `Text`,
    worded later, at the edge, in the reader's language."""
    token = _deferred.set(True)
    try:
        yield
    finally:
        _deferred.reset(token)


@functools.cache
def translations(lang: str) -> gettext.NullTranslations:
    return gettext.translation(DOMAIN, localedir=str(LOCALEDIR), languages=[lang], fallback=True)


def _(msgid: str) -> str:
    """`msgid` in the current language (the English msgid itself when there is no translation)."""
    if not msgid:
        return msgid  # gettext("") would be the catalogue's header
    if _deferred.get():
        return Text(("msg", msgid))
    return translations(current()).gettext(msgid)


def translate(lang: str | None, msgid: str) -> str:
    """`msgid` in `lang` (None: the current language)."""
    if not msgid:
        return msgid
    if lang is None and _deferred.get():
        return Text(("msg", msgid))
    return translations(current() if lang is None else normalise(lang)).gettext(msgid)


def text(table: Mapping[str, str], key: str, lang: str | None, /, **params: Any) -> str:
    """table[key] (a msgid) in `lang`, formatted: for modules that keep their texts in a table."""
    return translate(lang, table[key]).format(**params)


def N_(msgid: str) -> str:
    """Mark `msgid` for extraction; translate it later with _()."""
    return msgid


def fmt(msgid: str, /, **params: Any) -> str:
    """_(msgid).format(**params)."""
    return _(msgid).format(**params)


STATUS = {"passed": N_("passed"), "partial": N_("partial"), "failed": N_("failed"),
          "not_started": N_("not started"), "error": N_("error")}


def status(value: str) -> str:
    """A step status (passed, partial, failed, not_started, error) in the current language."""
    return _(STATUS[value]) if value in STATUS else value


def step_name(step: Any, lang: str | None = None) -> str:
    """A step's plain title in `lang` (default: the current language), without its number or section."""
    if lang is None and _deferred.get():
        return Text(("call", step_name, (step,)))
    return step.title_zh if normalise(lang or current()) == "zh" else step.title


def step_title(step: Any, lang: str | None = None) -> str:
    """A step's title as shown everywhere, one numbering: the step's number and the book's section, e.g.
    "Step 7 · Applying a causal attention mask (§3.5.1)" / "第 7 步 · 应用因果注意力掩码（§3.5.1）". An exercise's
    title names the exercise itself ("Exercise 3.1: …"), so it carries no section."""
    if lang is None and _deferred.get():
        return Text(("call", step_title, (step,)))
    section = "" if step.section.startswith("ex.") else step.section
    if normalise(lang or current()) == "zh":
        return f"第 {step.number} 步 · {step.title_zh}" + (f"（§{section}）" if section else "")
    return f"Step {step.number} · {step.title}" + (f" (§{section})" if section else "")


# the functions a "call" node may name, by name: what crosses a process as JSON (`to_data`) names its function so
_CALLS: dict[str, Any] = {}


def wording(name: str) -> Any:
    """Register a function of (*args, lang) that a Text may call when it is worded, under `name`."""
    def register(fn: Any) -> Any:
        _CALLS[name] = fn
        fn.wording_name = name
        return fn
    return register


_CALLS.update(step_title=step_title, step_name=step_name)  # their step goes by its id (`to_data`)


class Text(str):
    """A message not yet worded: a msgid with its parameters, parts joined, a step's title. Its str value is the
    English text (so logs, comparisons and the English JSON read it as before); `worded(lang)` says it in `lang`.

    Made by _(), fmt(), translate(None, ...) and .format/+ on a Text under `deferred()`; `join` joins a list."""

    node: tuple[Any, ...]

    def __new__(cls, node: tuple[Any, ...]) -> Text:
        self = super().__new__(cls, _word_node(node, "en"))
        self.node = node
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Text, (self.node,))

    def worded(self, lang: str | None) -> str:
        lang = normalise(lang)
        return str.__str__(self) if lang == "en" else _word_node(self.node, lang)  # its value is the English

    def format(self, *args: Any, **params: Any) -> Text:  # type: ignore[override]
        return Text(("fmt", self, args, params))

    def __add__(self, other: Any) -> Text:  # type: ignore[override]
        return Text(("cat", (self, other)))

    def rstrip(self, chars: str | None = None) -> Text:  # type: ignore[override]
        return Text(("call", _str_method, ("rstrip", self, chars)))

    def replace(self, old: str, new: str, count: int = -1) -> Text:  # type: ignore[override]
        """`old` replaced in the worded text: `old` is not itself translated (a placeholder, a learner's name)."""
        return Text(("call", _str_method, ("replace", self, old, new, count)))

    def __radd__(self, other: Any) -> Text:
        return Text(("cat", (other, self)))


@wording("str")
def _str_method(name: str, text: Any, *args: Any, lang: str) -> str:
    return getattr(str(word(text, lang)), name)(*args)


def said(exc: BaseException) -> str:
    """An exception's message, still a `Text` where it was raised with one (str(exc) would be the English)."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)


def word(value: Any, lang: str | None) -> Any:
    """A `Text` worded in `lang`; a plain value as it is (a str without a msgid is already words)."""
    return value.worded(lang) if isinstance(value, Text) else value


def join(sep: str, parts: Any) -> str:
    """sep.join(parts), each part worded later if any is a `Text`."""
    parts = list(parts)
    if not any(isinstance(p, Text) for p in parts) and not isinstance(sep, Text):
        return sep.join(parts)
    out: list[Any] = []
    for i, p in enumerate(parts):
        if i:
            out.append(sep)
        out.append(p)
    return Text(("cat", tuple(out)))


def to_data(value: Any) -> Any:
    """A message as JSON holds it, to be worded in another process (`from_data`): a plain str, int, float, bool or
    None as it is; a Text as {"text": its node}; anything else (an exception) as its str."""
    if isinstance(value, Text):
        return {"text": _node_data(value.node)}
    if type(value) is float and not math.isfinite(value):  # JSON holds no NaN or Inf: by name
        return {"float": repr(value)}
    if value is None or isinstance(value, str | int | float | bool):
        return value if type(value) in (str, int, float, bool) or value is None else str(value)
    return str(value)


def _node_data(node: tuple[Any, ...]) -> list[Any]:
    kind = node[0]
    if kind == "msg":
        return ["msg", node[1]]
    if kind == "fmt":
        return ["fmt", to_data(node[1]), [to_data(a) for a in node[2]], {k: to_data(v) for k, v in node[3].items()}]
    if kind == "cat":
        return ["cat", [to_data(p) for p in node[1]]]
    fn, args = node[1], node[2]
    if fn in (step_title, step_name):  # a step goes by its id
        return ["call", fn.__name__, [{"step": args[0].id}]]
    return ["call", fn.wording_name, [to_data(a) for a in args]]


def from_data(data: Any) -> Any:
    """`to_data`'s inverse: a Text again where it was one; a malformed node is refused (ValueError)."""
    if not isinstance(data, dict):
        return data
    if set(data) == {"float"}:
        return float(data["float"])
    if set(data) == {"step"}:
        from grader.registry import BY_ID

        return BY_ID[data["step"]]
    node = data.get("text")
    if not isinstance(node, list) or not node:
        raise ValueError("not a message")
    kind = node[0]
    if kind == "msg" and len(node) == 2 and isinstance(node[1], str):
        return Text(("msg", node[1]))
    if kind == "fmt" and len(node) == 4:
        return Text(("fmt", from_data(node[1]), tuple(from_data(a) for a in node[2]),
                     {str(k): from_data(v) for k, v in node[3].items()}))
    if kind == "cat" and len(node) == 2:
        return Text(("cat", tuple(from_data(p) for p in node[1])))
    if kind == "call" and len(node) == 3 and node[1] in _CALLS:
        return Text(("call", _CALLS[node[1]], tuple(from_data(a) for a in node[2])))
    raise ValueError(f"not a message node: {kind!r}")


def _word_node(node: tuple[Any, ...], lang: str) -> str:
    kind = node[0]
    if kind == "msg":
        return translations(lang).gettext(node[1])
    if kind == "fmt":
        _kind, base, args, params = node
        return str(word(base, lang)).format(*(word(a, lang) for a in args),
                                            **{k: word(v, lang) for k, v in params.items()})
    if kind == "cat":
        return "".join(str(word(p, lang)) for p in node[1])
    if kind == "call":  # a function of (*args, lang): a step's title, a cleaned message
        return str(node[1](*node[2], lang=lang))
    raise ValueError(f"not a Text node: {kind!r}")


class Msg(Exception):
    """Carries a msgid and its parameters across the worker boundary; the trusted side formats it.

    str() gives the English text, so anything that only logs it stays readable."""

    def __init__(self, msgid: str, /, **params: Any):
        super().__init__(msgid)
        self.msgid = msgid
        self.params = params

    def __str__(self) -> str:
        try:
            return str(self.msgid).format(**self.params)
        except Exception:  # a malformed template still says something
            return str(self.msgid)
