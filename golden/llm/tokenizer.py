"""GPT-2-style byte-level BPE tokenizer built from a GGUF file's metadata.

:class:`Tokenizer` reads ``tokenizer.ggml.model`` (must be ``"gpt2"``: byte-level BPE),
``tokenizer.ggml.tokens``, ``tokenizer.ggml.token_type``, ``tokenizer.ggml.merges``,
``tokenizer.ggml.pre`` (the pre-tokenizer), ``tokenizer.ggml.bos_token_id``,
``tokenizer.ggml.eos_token_id``, ``tokenizer.ggml.unknown_token_id`` and
``tokenizer.ggml.add_bos_token``. Sources: the GGUF specification's tokenizer keys (ggml
repository, ``docs/gguf.md``); Radford et al., "Language Models are Unsupervised Multitask
Learners" (GPT-2, section 2.2: BPE over bytes, merges not crossing character categories);
Sennrich et al., "Neural Machine Translation of Rare Words with Subword Units" (BPE).

Encoding (:meth:`Tokenizer.tokenize`):

1. With ``special=True``, the text is first split at the literal strings of the control tokens
   (``token_type`` 3: ``<|im_start|>``, ``<|endoftext|>``, ...), which become their ids;
   with ``special=False`` (the default) they are ordinary text.
2. Pre-tokenization (:func:`pre_split`) cuts the text into pieces that BPE never merges
   across. For ``pre`` ``"smollm"`` (SmolLM's tokenizer: a digit splitter, then GPT-2's byte-level
   regex) every numeric character (Unicode category N) is a piece on its own, and the rest is
   cut by GPT-2's pattern ``'s|'t|'re|'ve|'m|'ll|'d| ?L+| ?N+| ?[^\\sLN]+|\\s+(?!\\S)|\\s+``
   (L: Unicode letters, category L*; N: numbers, N*; \\s: Unicode White_Space). Pre-tokenizer
   ``"gpt2"`` (and its synonym ``"default"``) is the pattern alone. Python's ``re`` has no
   ``\\p{..}`` classes: L and N are spelled out as code-point ranges from ``unicodedata`` (the
   interpreter's Unicode version) and \\s as the White_Space list. Other ``pre`` values raise
   ValueError.
3. Each piece's UTF-8 bytes become characters through GPT-2's byte-to-character table
   (:func:`byte_to_char`: printable Latin-1 bytes are themselves, the other 68 bytes map to
   U+0100 onwards in byte order), then BPE merges adjacent symbols, always the pair of lowest
   rank in ``merges`` first (rank = position in the list), until no pair of the piece is in
   the list (:meth:`Tokenizer.bpe`).
4. Each symbol becomes its id in ``tokens``. A symbol the vocabulary lacks becomes
   ``unknown_token_id``: SmolLM2's vocabulary has no symbol for 21 single bytes (a few ASCII
   control characters, bytes that never occur in UTF-8 and two lead bytes of rare 4-byte
   sequences), so text holding them does not round-trip.
5. ``bos=True`` puts ``bos_token_id`` first; the default ``bos=None`` follows
   ``add_bos_token`` (False for SmolLM2: ``tokenize`` adds no BOS unless asked).

Decoding (:meth:`Tokenizer.detokenize`) concatenates the tokens' bytes
(:meth:`Tokenizer.token_bytes`: a control token gives its literal UTF-8 text, any other token
its characters mapped back to bytes) and decodes UTF-8, an invalid sequence as U+FFFD. So
``detokenize(tokenize(text)) == text`` for every text whose bytes all have symbols.

Ids out of ``0..vocab_size-1`` raise ValueError; non-integers TypeError.
"""

import re
import sys
import unicodedata
from functools import lru_cache

from ..common.checks import check_int_array

__all__ = ["Tokenizer", "byte_to_char", "pre_split", "TOKEN_TYPE_CONTROL"]

#: ``tokenizer.ggml.token_type`` of a control (special) token.
TOKEN_TYPE_CONTROL = 3

#: Unicode White_Space (PropList.txt): what \s matches in GPT-2's pattern.
WHITE_SPACE = ("\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000")


@lru_cache(maxsize=1)
def byte_to_char():
    """GPT-2's byte -> character table (a list of 256 one-character strings): bytes ``!``..``~``,
    ``0xA1``..``0xAC`` and ``0xAE``..``0xFF`` are the Latin-1 characters of the same code; the
    remaining 68 bytes, in increasing order, are U+0100, U+0101, ... (so every byte is a
    visible, non-space character)."""
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = [], 0
    for byte in range(256):
        if byte in kept:
            table.append(chr(byte))
        else:
            table.append(chr(0x100 + extra))
            extra += 1
    return table


def category_classes(prefixes):
    """Regex character-class bodies (a dict prefix -> str) of the code points whose Unicode
    category starts with each of ``prefixes`` (``"L"`` letters, ``"N"`` numbers), as ranges."""
    ranges = {prefix: [] for prefix in prefixes}
    previous = None
    for code in range(sys.maxunicode + 1):
        prefix = unicodedata.category(chr(code))[0]
        if prefix != previous and prefix in ranges:
            ranges[prefix].append([code, code])
        elif prefix == previous and prefix in ranges:
            ranges[prefix][-1][1] = code
        previous = prefix
    return {prefix: "".join(re.escape(chr(a)) if a == b
                            else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in spans)
            for prefix, spans in ranges.items()}


@lru_cache(maxsize=1)
def patterns():
    """The compiled ``(digit, gpt2)`` patterns of :func:`pre_split`."""
    classes = category_classes("LN")
    letter, number = classes["L"], classes["N"]
    gpt2 = (rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{letter}]+| ?[{number}]+"
            rf"| ?[^{WHITE_SPACE}{letter}{number}]+|[{WHITE_SPACE}]+(?![^{WHITE_SPACE}])"
            rf"|[{WHITE_SPACE}]+")
    return re.compile(f"[{number}]"), re.compile(gpt2)


def pre_split(text, pre="smollm"):
    """The pre-tokenizer pieces of ``text`` (a list of non-empty strings that join to
    ``text``) for the GGUF pre-tokenizer name ``pre`` (module docstring, step 2)."""
    digit, gpt2 = patterns()
    if pre in ("gpt2", "default"):
        return gpt2.findall(text)
    if pre != "smollm":
        raise ValueError(f"pre must be 'smollm', 'gpt2' or 'default', not {pre!r}")
    pieces, start = [], 0
    for match in digit.finditer(text):
        pieces += gpt2.findall(text[start:match.start()])
        pieces.append(match.group())
        start = match.end()
    return pieces + gpt2.findall(text[start:])


class Tokenizer:
    """Byte-level BPE tokenizer of a GGUF file's metadata (a dict, module docstring).

    Attributes: ``tokens`` (id -> symbol string), ``vocab_size``, ``bos_id``, ``eos_id``,
    ``unknown_id``, ``add_bos``, ``pre`` and ``control_ids`` (the ids of control tokens).
    """

    def __init__(self, metadata):
        model = metadata.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise ValueError(f"tokenizer.ggml.model must be 'gpt2' (byte-level BPE), "
                             f"not {model!r}")
        self.tokens = list(metadata["tokenizer.ggml.tokens"])
        self.vocab_size = len(self.tokens)
        self.pre = metadata.get("tokenizer.ggml.pre", "default")
        pre_split("", self.pre)                                 # reject unknown names now
        types = metadata.get("tokenizer.ggml.token_type", [1] * self.vocab_size)
        self.control_ids = frozenset(i for i, t in enumerate(types) if t == TOKEN_TYPE_CONTROL)
        self.bos_id = metadata.get("tokenizer.ggml.bos_token_id")
        self.eos_id = metadata.get("tokenizer.ggml.eos_token_id")
        self.unknown_id = metadata.get("tokenizer.ggml.unknown_token_id")
        self.add_bos = bool(metadata.get("tokenizer.ggml.add_bos_token", False))
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        self.ranks = {tuple(merge.split(" ")): rank
                      for rank, merge in enumerate(metadata["tokenizer.ggml.merges"])}
        self.char_of_byte = byte_to_char()
        self.byte_of_char = {char: byte for byte, char in enumerate(self.char_of_byte)}
        controls = sorted((self.tokens[i] for i in self.control_ids), key=len, reverse=True)
        self.control_split = re.compile("(" + "|".join(map(re.escape, controls)) + ")")
        self.cache = {}

    def bpe(self, piece):
        """The BPE symbols of one pre-tokenizer piece (a str), lowest-rank pair first."""
        if piece in self.cache:
            return self.cache[piece]
        symbols = [self.char_of_byte[b] for b in piece.encode("utf-8")]
        while len(symbols) > 1:
            ranked = [(self.ranks.get(pair, len(self.ranks)), i)
                      for i, pair in enumerate(zip(symbols, symbols[1:]))]
            rank, at = min(ranked)
            if rank == len(self.ranks):
                break
            pair = (symbols[at], symbols[at + 1])
            merged, i = [], 0
            while i < len(symbols):                            # merge every occurrence, left first
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        self.cache[piece] = symbols
        return symbols

    def tokenize(self, text, bos=None, special=False):
        """Token ids (a list of int) of ``text``; ``bos``: put ``bos_id`` first (None: as
        ``add_bos``); ``special``: read control tokens' literal strings as those tokens."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        ids = [self.bos_id] if (self.add_bos if bos is None else bos) else []
        parts = self.control_split.split(text) if special and self.control_ids else [text]
        for k, part in enumerate(parts):
            if k % 2:                                         # a control token's string
                ids.append(self.ids[part])
                continue
            for piece in pre_split(part, self.pre):
                ids += [self.ids.get(symbol, self.unknown_id) for symbol in self.bpe(piece)]
        return ids

    def token_bytes(self, token):
        """The bytes token id ``token`` stands for (a control token: its UTF-8 text)."""
        [token] = check_int_array("token", [token], 0, self.vocab_size - 1, "token ids")
        text = self.tokens[token]
        if token in self.control_ids:
            return text.encode("utf-8")
        return bytes(self.byte_of_char[char] for char in text)

    def detokenize(self, tokens):
        """The text of token ids ``tokens`` (invalid UTF-8 decodes as U+FFFD)."""
        tokens = check_int_array("tokens", tokens, 0, self.vocab_size - 1, "token ids")
        return b"".join(self.token_bytes(t) for t in tokens.tolist()).decode("utf-8", "replace")
