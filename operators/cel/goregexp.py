"""Regular expressions as Go's regexp/syntax (Go 1.26, or Go 1.27) reads them, handed to RE2.

cel-go compiles ``matches``, ``find`` and ``findAll`` patterns with Go's regexp; kopf-dra runs
them on RE2. Both are RE2 syntax, but they part in a few places, found by running patterns of
every construct through both (Go's regexp.Compile against RE2's compile, then through the CEL
oracle, hack/cel-oracle). ``translate`` refuses what Go refuses and rewrites what Go reads
otherwise, so that RE2 answers as Go would:

- ``\\C`` (any byte): RE2 reads it, Go refuses it ("invalid escape sequence").
- ``\\p{Name}`` / ``\\P{Name}``: Go (1.25 on) looks a name up after dropping ``_``, ``-`` and
  spaces and lowering every letter but the first. So ``\\p{greek}``, ``\\pl``,
  ``\\p{Uppercase_Letter}`` and the other aliases of categories (unicode.CategoryAliases),
  ``\\p{ASCII}``, ``\\p{Assigned}``, ``\\p{Cn}`` and ``\\p{LC}`` are Go's and not RE2's, while
  every script whose name has an underscore or a capital inside (``\\p{Linear_A}``,
  ``\\p{Old_Italic}``, ``\\p{SignWriting}``) is RE2's and not Go's: Go finds no such table.
  Scripts newer than Go's Unicode 15.0.0 (``\\p{Garay}``) are refused too.
- ``\\p{C}``: Go's Other includes the unassigned code points (Cn), RE2's does not.
- Capture names: Go takes ASCII letters, digits and ``_`` only; RE2 any letter (``(?P<é>a)``).
- ``(?i)\\p{LC}`` (``Cased_Letter``): Go has no case-folding table for LC, so ``(?i)`` leaves
  it as it is; RE2 adds U+0345 (it folds to iota).
- Nesting: Go refuses a parse tree more than 1,000 deep; RE2 goes deeper. Counted here by
  capturing groups, which Go never flattens: 1,000 nested ones are too deep.

Go 1.27 (Kubernetes 1.38's, ``translate(..., go127=True)``) also finds a script by that loose
name (``\\p{Old_Italic}``, ``\\p{linear_a}``), and its tables are Unicode 17.0.0: the eleven
scripts since 15.0.0 (``\\p{Garay}``, ``\\p{Sidetic}``, ...) are spelled out here as ranges,
RE2 knowing none of them.

What remains different, and is left so (each needs nesting, sizes or code points no selector
is likely to have): the depth Go's tree gets from nodes other than capturing groups (a
concatenation around 999 nested groups is too deep for Go, not here); RE2 compiles in 8 MiB of
program where Go allows some 3.3 million instructions (``\\pL{1000}`` is a compile error here,
not in cel-go); RE2's Unicode tables are not Go's (a code point assigned in a version one has
and the other has not is in a class on one side only: Go 1.27's categories hold Unicode 16 and
17's letters, RE2's do not); inside a bracket class, ``(?i)`` folds LC as RE2 does (U+0345).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

__all__ = ["GoRegexpError", "translate"]

# google-re2 ships without type information.
_re2: Any = importlib.import_module("re2")


class GoRegexpError(ValueError):
    """Go's regexp.Compile refuses the pattern (kopf-dra's RE2 would take it)."""


# Go 1.26's unicode tables (Unicode 15.0.0): categories, scripts, category aliases.
_CATEGORIES = frozenset(
    """
    C Cc Cf Cn Co Cs L LC Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps S Sc Sk
    Sm So Z Zl Zp Zs
    """.split()  # noqa: SIM905 (a table, as Go prints it)
)
_SCRIPTS = frozenset(
    """
    Adlam Ahom Anatolian_Hieroglyphs Arabic Armenian Avestan Balinese Bamum Bassa_Vah Batak
    Bengali Bhaiksuki Bopomofo Brahmi Braille Buginese Buhid Canadian_Aboriginal Carian
    Caucasian_Albanian Chakma Cham Cherokee Chorasmian Common Coptic Cuneiform Cypriot
    Cypro_Minoan Cyrillic Deseret Devanagari Dives_Akuru Dogra Duployan Egyptian_Hieroglyphs
    Elbasan Elymaic Ethiopic Georgian Glagolitic Gothic Grantha Greek Gujarati Gunjala_Gondi
    Gurmukhi Han Hangul Hanifi_Rohingya Hanunoo Hatran Hebrew Hiragana Imperial_Aramaic
    Inherited Inscriptional_Pahlavi Inscriptional_Parthian Javanese Kaithi Kannada Katakana
    Kawi Kayah_Li Kharoshthi Khitan_Small_Script Khmer Khojki Khudawadi Lao Latin Lepcha Limbu
    Linear_A Linear_B Lisu Lycian Lydian Mahajani Makasar Malayalam Mandaic Manichaean Marchen
    Masaram_Gondi Medefaidrin Meetei_Mayek Mende_Kikakui Meroitic_Cursive Meroitic_Hieroglyphs
    Miao Modi Mongolian Mro Multani Myanmar Nabataean Nag_Mundari Nandinagari New_Tai_Lue Newa
    Nko Nushu Nyiakeng_Puachue_Hmong Ogham Ol_Chiki Old_Hungarian Old_Italic Old_North_Arabian
    Old_Permic Old_Persian Old_Sogdian Old_South_Arabian Old_Turkic Old_Uyghur Oriya Osage
    Osmanya Pahawh_Hmong Palmyrene Pau_Cin_Hau Phags_Pa Phoenician Psalter_Pahlavi Rejang Runic
    Samaritan Saurashtra Sharada Shavian Siddham SignWriting Sinhala Sogdian Sora_Sompeng
    Soyombo Sundanese Syloti_Nagri Syriac Tagalog Tagbanwa Tai_Le Tai_Tham Tai_Viet Takri Tamil
    Tangsa Tangut Telugu Thaana Thai Tibetan Tifinagh Tirhuta Toto Ugaritic Vai Vithkuqi Wancho
    Warang_Citi Yezidi Yi Zanabazar_Square
    """.split()  # noqa: SIM905 (a table, as Go prints it)
)
_ALIASES = {
    "Cased_Letter": "LC",
    "Close_Punctuation": "Pe",
    "Combining_Mark": "M",
    "Connector_Punctuation": "Pc",
    "Control": "Cc",
    "Currency_Symbol": "Sc",
    "Dash_Punctuation": "Pd",
    "Decimal_Number": "Nd",
    "Enclosing_Mark": "Me",
    "Final_Punctuation": "Pf",
    "Format": "Cf",
    "Initial_Punctuation": "Pi",
    "Letter": "L",
    "Letter_Number": "Nl",
    "Line_Separator": "Zl",
    "Lowercase_Letter": "Ll",
    "Mark": "M",
    "Math_Symbol": "Sm",
    "Modifier_Letter": "Lm",
    "Modifier_Symbol": "Sk",
    "Nonspacing_Mark": "Mn",
    "Number": "N",
    "Open_Punctuation": "Ps",
    "Other": "C",
    "Other_Letter": "Lo",
    "Other_Number": "No",
    "Other_Punctuation": "Po",
    "Other_Symbol": "So",
    "Paragraph_Separator": "Zp",
    "Private_Use": "Co",
    "Punctuation": "P",
    "Separator": "Z",
    "Space_Separator": "Zs",
    "Spacing_Mark": "Mc",
    "Surrogate": "Cs",
    "Symbol": "S",
    "Titlecase_Letter": "Lt",
    "Unassigned": "Cn",
    "Uppercase_Letter": "Lu",
    "cntrl": "Cc",
    "digit": "Nd",
    "punct": "P",
}
# Go 1.27's scripts that Unicode 15.0.0 has not (Unicode 16.0 and 17.0), as (first, last) code
# point ranges of its tables; none has a case-folding table.
_SCRIPTS_127: dict[str, tuple[tuple[int, int], ...]] = {
    "Beria_Erfe": ((0x16EA0, 0x16EB8), (0x16EBB, 0x16ED3)),
    "Garay": ((0x10D40, 0x10D65), (0x10D69, 0x10D85), (0x10D8E, 0x10D8F)),
    "Gurung_Khema": ((0x16100, 0x16139),),
    "Kirat_Rai": ((0x16D40, 0x16D79),),
    "Ol_Onal": ((0x1E5D0, 0x1E5FA), (0x1E5FF, 0x1E5FF)),
    "Sidetic": ((0x10940, 0x10959),),
    "Sunuwar": ((0x11BC0, 0x11BE1), (0x11BF0, 0x11BF9)),
    "Tai_Yo": ((0x1E6C0, 0x1E6DE), (0x1E6E0, 0x1E6F5), (0x1E6FE, 0x1E6FF)),
    "Todhri": ((0x105C0, 0x105F3),),
    "Tolong_Siki": ((0x11DB0, 0x11DDB), (0x11DE0, 0x11DE9)),
    "Tulu_Tigalari": (
        *((0x11380, 0x11389), (0x1138B, 0x1138B), (0x1138E, 0x1138E), (0x11390, 0x113B5)),
        *((0x113B7, 0x113C0), (0x113C2, 0x113C2), (0x113C5, 0x113C5), (0x113C7, 0x113CA)),
        *((0x113CC, 0x113D5), (0x113D7, 0x113D8), (0x113E1, 0x113E2)),
    ),
}
MAX_HEIGHT = 1000  # Go's maxHeight
# Classes RE2 has under another name or not at all, as unions of RE2 classes (``~``: the
# complement of that union). Go's C and Assigned count the unassigned code points differently.
_ASSIGNED = r"\p{L}\p{M}\p{N}\p{P}\p{S}\p{Z}\p{C}"
_SPELLED = {
    "LC": r"\p{Lu}\p{Ll}\p{Lt}",
    "C": r"~\p{L}\p{M}\p{N}\p{P}\p{S}\p{Z}",
    "Cn": "~" + _ASSIGNED,
    "Assigned": _ASSIGNED,
    "Ascii": r"\x00-\x7f",
}
_LAST = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)


def _canonical(name: str) -> str:
    """Go's canonicalName: no ``_``, ``-`` or spaces; the first letter upper, the rest lower."""
    out: list[str] = []
    for c in name:
        if c in "_- ":
            continue
        if not out:
            out.append(c.upper() if "a" <= c <= "z" else c)
        else:
            out.append(c.lower() if "A" <= c <= "Z" else c)
    return "".join(out)


_GO_NAMES: dict[str, str] = {
    **{k: k for k in (*_CATEGORIES, *_SCRIPTS) if _canonical(k) == k},
    **{_canonical(alias): category for alias, category in _ALIASES.items()},
    "Lc": "LC",
    "Any": "Any",
    "Assigned": "Assigned",
    "Ascii": "Ascii",
}


# Go 1.27 looks a script up by its loose name too (and knows Unicode 17's); a category, or a
# category's alias, wins where a script's loose name is the same.
_GO_NAMES_127: dict[str, str] = {
    **{_canonical(k): k for k in (*_SCRIPTS, *_SCRIPTS_127)},
    **_GO_NAMES,
}


def _items(ranges: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> str:
    """Ranges of code points as the items of an RE2 bracket class."""
    return "".join(
        rf"\x{{{lo:x}}}-\x{{{hi:x}}}" if lo != hi else rf"\x{{{lo:x}}}" for lo, hi in ranges
    )


@functools.cache
def _ranges(items: str, fold: bool) -> tuple[tuple[int, int], ...]:
    """The code points of the RE2 class ``[items]`` (``fold``: with their case variants), as
    RE2's tables have them, surrogates left out (no UTF-8 text holds one); found by running
    RE2 once over every code point."""
    low, high = _SURROGATES
    text = "".join(chr(c) for c in range(_LAST + 1) if not low <= c <= high)

    def code_point(index: int) -> int:
        return index if index < low else index + high - low + 1

    found = _re2.compile(f"{'(?i)' if fold else ''}[{items}]+").finditer(text)
    return tuple((code_point(m.start()), code_point(m.end() - 1)) for m in found)


def _complement(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """Every code point but the surrogates that ``ranges`` (sorted, apart) leave out."""
    out: list[tuple[int, int]] = []
    start = 0
    for lo, hi in [*sorted([*ranges, _SURROGATES]), (_LAST + 1, _LAST + 1)]:
        if lo > start:
            out.append((start, lo - 1))
        start = max(start, hi + 1)
    return out


def _class_items(name: str, negated: bool, fold: bool) -> str:
    """Go's class ``name`` (negated: its complement) as items of an RE2 bracket class.

    Go negates after adding the case variants (``(?i)\\P{ASCII}`` leaves out the Kelvin sign,
    a variant of k): a complement is taken of the class with its variants, which RE2's own
    folding of the result then leaves as it is.
    """
    spelled = _SPELLED[name]
    items = spelled.lstrip("~")
    if spelled.startswith("~") == negated:
        return items
    return _items(_complement(_ranges(items, fold)))


class _Reader:
    """One pass over a pattern, as Go's parser reads it: quoting, classes, groups, flags."""

    def __init__(self, pattern: str, go127: bool = False) -> None:
        self.pattern = pattern
        self.names = _GO_NAMES_127 if go127 else _GO_NAMES
        self.out: list[str] = []
        self.at = 0
        self.fold = False  # the i flag, where the reader is
        self.groups: list[tuple[bool, bool]] = []  # per open group: capturing, fold outside
        self.captures = 0

    def translate(self) -> str:
        pattern, n = self.pattern, len(self.pattern)
        while self.at < n:
            c = pattern[self.at]
            if c == "\\":
                self._escape(in_class=False)
            elif c == "[":
                self._class()
            elif c == "(":
                self._open()
            elif c == ")" and self.groups:
                capturing, self.fold = self.groups.pop()
                self.captures -= capturing
                self._copy(1)
            else:
                self._copy(1)
        return "".join(self.out)

    def _copy(self, length: int) -> None:
        self.out.append(self.pattern[self.at : self.at + length])
        self.at += length

    def _escape(self, *, in_class: bool) -> None:
        pattern, at = self.pattern, self.at
        d = pattern[at + 1 : at + 2]
        if d in ("p", "P"):
            self._unicode_class(in_class)
        elif d == "C" and not in_class:
            raise GoRegexpError("error parsing regexp: invalid escape sequence: `\\C`")
        elif d == "Q" and not in_class:  # literal text up to \E
            end = pattern.find("\\E", at + 2)
            self._copy((len(pattern) if end < 0 else end + 2) - at)
        else:
            self._copy(2)

    def _class(self) -> None:
        """A bracket class: a ']' first is a literal; [:alpha:] is one item."""
        pattern, n = self.pattern, len(self.pattern)
        first = self.at + 1 + pattern.startswith("^", self.at + 1)
        self._copy(first - self.at)
        while self.at < n:
            c = pattern[self.at]
            if c == "\\":
                self._escape(in_class=True)
            elif pattern.startswith("[:", self.at) and (end := pattern.find(":]", self.at)) > 0:
                self._copy(end + 2 - self.at)
            else:
                self._copy(1)
                if c == "]" and self.at - 1 > first:
                    return

    def _open(self) -> None:
        pattern, at = self.pattern, self.at
        if pattern.startswith("(?P<", at) or pattern.startswith("(?<", at):
            self._capture_name()
            capturing = True
        elif pattern.startswith("(?", at):
            end = at + 2
            while end < len(pattern) and pattern[end] in "imsU-":
                end += 1
            fold, sign = self.fold, True
            for flag in pattern[at + 2 : end]:  # (?i-s: sets i, clears s
                if flag == "-":
                    sign = False
                elif flag == "i":
                    fold = sign
            if pattern.startswith(")", end):  # (?flags): for the rest of the group
                self.fold = fold
                self._copy(end + 1 - at)
                return
            self.groups.append((False, self.fold))
            self.fold = fold
            self._copy(1)
            return
        else:
            capturing = True
        self.groups.append((capturing, self.fold))
        self.captures += capturing
        if self.captures >= MAX_HEIGHT:
            raise GoRegexpError("error parsing regexp: expression nests too deeply")
        self._copy(1)

    def _capture_name(self) -> None:
        """Go's isValidCaptureName for ``(?P<name>`` or ``(?<name>``."""
        pattern, at = self.pattern, self.at
        start = at + (4 if pattern.startswith("(?P<", at) else 3)
        close = pattern.find(">", start)
        if close < 0:
            return  # RE2 refuses it as Go does
        if not all(c == "_" or (c.isascii() and c.isalnum()) for c in pattern[start:close]):
            text = pattern[at : close + 1]
            raise GoRegexpError(f"error parsing regexp: invalid named capture: `{text}`")

    def _unicode_class(self, in_class: bool) -> None:
        """Go's parseUnicodeClass: a name Go knows, for RE2 (rewritten where RE2 has none by
        that name or another class by it); one Go does not know is refused."""
        pattern, at = self.pattern, self.at
        negated = pattern[at + 1] == "P"
        rest = at + 2
        if pattern.startswith("{", rest):
            close = pattern.find("}", rest)
            name, end = pattern[rest + 1 : close], close + 1
        else:
            name, end = pattern[rest : rest + 1], rest + 1
        if end <= rest or not name:  # no name, or no closing brace: RE2 refuses it too
            self._copy(len(pattern) - at)
            return
        text = pattern[at:end]
        if name.startswith("^"):
            negated, name = not negated, name[1:]
        found = self.names.get(_canonical(name))
        if found is None:
            raise GoRegexpError(f"error parsing regexp: invalid character class range: `{text}`")
        self.at = end
        spelled = _SCRIPTS_127.get(found)
        if spelled is not None:  # none has a folding table: (?i) adds nothing in Go
            items = _items(_complement(spelled) if negated else spelled)
            self.out.append(items if in_class else f"(?-i:[{items}])")
            return
        if found not in _SPELLED:
            self.out.append(rf"\{'P' if negated else 'p'}{{{found}}}")
            return
        if found == "LC" and self.fold and not in_class:
            # Go has no case-folding table for LC: (?i) leaves it as it is (RE2 would add
            # U+0345, which folds to iota).
            self.out.append(rf"(?-i:[{'^' if negated else ''}\p{{Lu}}\p{{Ll}}\p{{Lt}}])")
            return
        items = _class_items(found, negated, self.fold)
        self.out.append(items if in_class else f"[{items}]")


def translate(pattern: str, go127: bool = False) -> str:
    """``pattern`` for RE2, read as Go reads it (``go127``: Go 1.27, else 1.26); raises
    GoRegexpError where Go refuses it and RE2 would not (RE2 refuses the rest of what Go
    refuses itself)."""
    return _Reader(pattern, go127).translate()
