"""``toolstitch demo``: the command's options; the conversation itself is in ``_demo``.

Exit 0 when the conversation completed with a valid history, 1 otherwise, 2 (one line on stderr)
when the endpoint failed.
"""

from __future__ import annotations

import argparse
import sys

import openai

from ._demo import REMOTE_MODEL, run_demo
from ._demo_responses import run_responses_demo
from ._output import SafeOutput, fail

__all__ = ["DESCRIPTION", "HELP", "NAME", "add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    if args.web:
        return _serve_web(args)
    try:
        if args.api == "responses":
            local = True if args.local else None
            return run_responses_demo(
                model=args.model,
                json_output=args.json,
                local=local,
                out=SafeOutput(sys.stdout),
                drop=args.drop,
            )
        if args.drop:
            return fail("demo", "--drop needs --api responses (Chat Completions has no resume protocol)")
        return run_demo(model=args.model, json_output=args.json, local=True if args.local else None)
    except openai.OpenAIError as exc:
        return fail("demo", f"{type(exc).__name__}: {exc}")


def _serve_web(args: argparse.Namespace) -> int:
    """``--web``: serve the page until Ctrl-C; the embedded model, never a real endpoint."""
    from ._web import WebDemo

    if not 0 <= args.port <= 65535:
        return fail("demo", f"--port must be from 0 to 65535, not {args.port}")
    if not 0 <= args.delay <= 10:
        return fail("demo", f"--delay must be from 0 to 10 seconds, not {args.delay}")
    try:
        demo = WebDemo(port=args.port, delay=args.delay, api=args.api)
    except OSError as exc:
        return fail("demo", f"cannot listen on port {args.port}: {exc.strerror or exc}")
    print(f"toolstitch demo: open {demo.url} (Ctrl-C stops)", flush=True)
    try:
        demo.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        demo.stop()
    return 0


NAME = "demo"
HELP = "run a two-step streamed tool conversation and show how it was stitched"
DESCRIPTION = """\
Run a two-step tool conversation with the real openai client through toolstitch.wrap: parallel,
interleaved, finely fragmented tool calls, local tool execution, then a final answer. Prints the
calls, the results, the history and a fragment timeline. Without OPENAI_API_KEY it uses an embedded
local server on 127.0.0.1; with it (and optionally OPENAI_BASE_URL) it runs against that endpoint.
Exit 0 when the conversation completed with a valid history, 1 otherwise, 2 when the endpoint
failed.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``toolstitch demo``."""
    parser.add_argument(
        "--model", metavar="M", help=f"model name (default: {REMOTE_MODEL} on a real endpoint)"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    parser.add_argument(
        "--api",
        choices=("chat", "responses"),
        default="chat",
        help="the API the conversation uses: chat completions (default) or the Responses API",
    )
    parser.add_argument(
        "--drop",
        action="store_true",
        help=(
            "with --api responses: create background responses and drop the first stream's "
            "connection mid-call, to show it resume (the embedded local server)"
        ),
    )
    parser.add_argument(
        "--local", action="store_true", help="use the embedded local server even when OPENAI_API_KEY is set"
    )
    parser.add_argument(
        "--web",
        action="store_true",
        help=(
            "serve the conversation as a web page on 127.0.0.1 (embedded local server; Ctrl-C "
            "stops); with --api responses, over the Responses API"
        ),
    )
    parser.add_argument(
        "--port", type=int, default=0, metavar="N", help="port for --web (default 0: pick a free one)"
    )
    parser.add_argument(
        "--delay",
        type=float,
        default=0.05,
        metavar="S",
        help="seconds between the embedded model's chunks for --web (default 0.05)",
    )
