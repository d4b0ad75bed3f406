"""``lmk-rag serve``: an HTTP server for embeddings (OpenAI's and TEI's shapes), landmarks with
their spans, search and contexts. Needs the ``serve`` extra: ``pip install 'lmk-rag[serve]'``."""

from typing import TYPE_CHECKING

from .settings import ServeSettings

if TYPE_CHECKING:
    from .app import create_app

__all__ = ["ServeSettings", "create_app"]


def __getattr__(name: str) -> object:
    # The ASGI stack is imported only when an app is built (the extra may be missing).
    if name == "create_app":
        from ..errors import MissingDependencyError

        try:
            from .app import create_app
        except ImportError as exc:
            raise MissingDependencyError(f"the server needs {exc.name}: pip install 'lmk-rag[serve]'") from exc
        return create_app
    raise AttributeError(name)
