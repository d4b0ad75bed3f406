"""Options and helpers the ``lmk-rag`` commands share: encoder options generated from
:class:`~lmk_rag.encoding.settings.EncoderSettings`, the index option and opening an index with the encoder
it records, list types, and printing URIs without their passwords."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..encoding.settings import EncoderSettings, setting_fields
from ..errors import IndexNotFoundError, LMKError
from ..index.redact import redact_uri

if TYPE_CHECKING:
    from ..index.base import MultiVectorIndex
    from ..index.filters import FilterArg

logger = logging.getLogger(__name__)

#: What a command runs: the parsed arguments in, the exit status out.
Handler = Callable[[argparse.Namespace], int]


class Command(Protocol):
    """Adds one subcommand: its name, what it runs, its example lines (shown at the end of
    ``lmk-rag NAME -h``) and ``add_parser``'s other arguments (help, description)."""

    def __call__(self, name: str, run: Handler, example: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def ints(text: str) -> list[int]:
    """``--option 1,2,3`` as a list of ints (argparse type), or an error naming the text."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc


def floats(text: str) -> list[float]:
    """``--option 0.5,0.5`` as a list of floats (argparse type), or an error naming the text."""
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from exc


def granularity_option(text: str) -> int | str | list[int] | None:
    """'32', 'sentence', 'none' (one landmark per window) or '32,64,128' (variable)."""
    if text in ("sentence", "default"):
        return text
    if text.lower() == "none":
        return None
    ks = ints(text)
    return ks[0] if len(ks) == 1 else ks


def add_encoder_options(p: argparse.ArgumentParser, *, exclude: Sequence[str] = (), runtime_only: bool = False) -> None:
    """One ``--option`` per :class:`EncoderSettings` field marked ``cli``; an option not given
    leaves the setting to the index, the model folder or the default, in that order.
    ``runtime_only``: only the settings that do not change the vectors (device, precision,
    backend, batching), for commands that use the index's own encoder."""
    title = (
        "how to run the index's encoder (its model and settings come from the index)"
        if runtime_only
        else "encoder settings (default: the index's, else the model folder's, else built-in)"
    )
    group = p.add_argument_group(title)
    for f, hint in setting_fields():
        if not f.metadata["cli"] or f.name in exclude or (runtime_only and f.metadata["fingerprint"]):
            continue
        kwargs: dict[str, Any] = {
            "dest": f.name,
            "default": None,
            "help": f"{f.metadata['help']} (default {f.default!r})",
        }
        if hint is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif f.name == "granularity":
            kwargs["type"] = granularity_option
        elif int in (hint, *typing.get_args(hint)):
            kwargs["type"] = int
        if f.metadata["choices"]:
            kwargs["choices"] = f.metadata["choices"]
        group.add_argument("--" + f.name.replace("_", "-"), **kwargs)


def encoder_options(args: argparse.Namespace) -> dict[str, Any]:
    """The encoder settings given on the command line."""
    return {
        name: getattr(args, name)
        for name in EncoderSettings.names("cli")
        if hasattr(args, name) and getattr(args, name) is not None
    }


def json_filter(text: str) -> FilterArg:
    """``--filter``: a JSON object, checked before any model loads."""
    import json

    from ..index.filters import parse_filter

    try:
        where = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f'not JSON ({exc.msg}); give an object such as \'{{"lang": "en"}}\'') from exc
    try:
        parse_filter(where)
    except LMKError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return cast("FilterArg", where)  # parse_filter checked it


def package_version() -> str:
    """The installed distribution's version (the package's own when run from a source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lmk-rag")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        from .._version import __version__

        return __version__


def add_quantization_option(p: argparse.ArgumentParser) -> None:
    """``--quantization int8|binary`` for commands that may create a Qdrant index."""
    p.add_argument(
        "--quantization",
        choices=("int8", "binary"),
        default=None,
        help="new Qdrant indexes: landmark vectors quantized in RAM, originals on disk for rescoring",
    )


def add_index_options(p: argparse.ArgumentParser, *, runtime_only: bool = False) -> None:
    """``--index URI`` plus the encoder options (``runtime_only``: those that do not change vectors,
    for commands that read an existing index)."""
    from ..index.uri import URI_HELP

    p.add_argument("--index", default="qdrant:./lmk_index", help=URI_HELP + " (default qdrant:./lmk_index)")
    add_encoder_options(p, runtime_only=runtime_only)


def open_index_of(args: argparse.Namespace, must_exist: bool) -> MultiVectorIndex:
    """Open the index with the encoder it records (options given on the command line override)."""
    from ..encoder import LMKEncoder
    from ..index.uri import open_index, parse_index_uri, read_fingerprint

    uri = parse_index_uri(args.index)
    stored = read_fingerprint(uri)
    if stored is None and must_exist:
        raise IndexNotFoundError(
            f"no lmk-rag index at {redact_uri(args.index)}; build one with: lmk-rag ingest PATH --index "
            f"{redact_uri(args.index)}"
        )
    settings = stored.encoder_settings() if stored is not None else {}
    given = encoder_options(args)
    settings.update(given)
    logger.info(
        "index %s: %s; encoder settings from %s",
        redact_uri(args.index),
        "existing" if stored is not None else "new",
        "the index" + (" and the command line" if given else "") if stored is not None else "the command line",
    )
    index = open_index(uri, LMKEncoder(**settings), quantization=getattr(args, "quantization", None))
    logger.info("opened %s (%d documents)", type(index).__name__, len(index))
    return index


def add_config_options(p: argparse.ArgumentParser, fields: Sequence[tuple[dataclasses.Field[object], object]]) -> None:
    """One ``--option`` per field of a config dataclass whose metadata marks it ``cli`` (help, choices and
    an inverted ``flag`` from the metadata; the default and the type from the field), so a default or a
    description is written once, in the dataclass."""
    for f, hint in fields:
        meta = f.metadata
        if not meta.get("cli", True):
            continue
        flag = meta.get("flag") or "--" + f.name.replace("_", "-")
        kwargs: dict[str, Any] = {"dest": f.name, "help": meta["help"]}
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs["required"] = True
        else:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            kwargs["default"] = default
            if not (default is None or isinstance(default, bool) or default == []):
                shown = ",".join(map(str, default)) if isinstance(default, list) else default
                kwargs["help"] += f" (default {shown})"
        args = typing.get_args(hint)
        if hint is bool:
            kwargs["action"] = "store_false" if kwargs.get("default") else "store_true"
        elif hint == list[str]:
            kwargs["action"] = "append"
        elif hint == list[int]:
            kwargs["type"] = ints
        elif int in (hint, *args):
            kwargs["type"] = int
        elif float in (hint, *args):
            kwargs["type"] = float
        if meta.get("choices"):
            kwargs["choices"] = meta["choices"]
        p.add_argument(flag, **kwargs)
