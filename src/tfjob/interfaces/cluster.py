"""What every cluster command shares: which cluster and namespace (kubectl's flags),
the connection, a job as the user names it (`NAME`, `KIND NAME`, `KIND/NAME`),
durations as kubectl writes them, and one-line errors.

Exit statuses, the same for every cluster command: 0 done (or Succeeded), 1 the job
Failed (or was deleted while followed), 2 bad input (a file, a refusal, an unknown or
ambiguous job, an unknown kind or replica), 3 the cluster cannot be used (unreachable,
the kind's CRD not installed, bad kubeconfig, forbidden), 124 `--timeout` passed,
130 Ctrl-C.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any, TypeVar

import click
import msgspec

from tfjob.api.timestamps import parse_rfc3339
from tfjob.api.types import JobCondition
from tfjob.interfaces.cluster_client.follow import JobDeleted
from tfjob.interfaces.cluster_client.jobs_api import (
    AmbiguousJob,
    JobsApi,
    NoJobApi,
    NoSuchJob,
    Object,
    kind_named,
    kind_of,
    known_kinds,
)
from tfjob.interfaces.cluster_client.kinds import ClusterKind, cluster_kind
from tfjob.interfaces.job_files import BadInput
from tfjob.interfaces.outcome import EXIT_FAILED, exit_status
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.credentials import Connection, CredentialsError, connection

EXIT_CLUSTER = 3
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class ClusterProblem(click.ClickException):
    """The cluster cannot be used as asked: printed on one line, exit status 3."""

    exit_code = EXIT_CLUSTER

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"tfjob: {self.format_message()}", err=True)


class JobEnded(ClusterProblem):
    """The followed job went away without an outcome: exit status 1, as a failure."""

    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class Target:
    """Where a command acts: kubeconfig, context and namespace, as kubectl picks them."""

    kubeconfig: str | None
    context: str | None
    namespace: str | None

    def connect(self) -> Connection:
        try:
            return connection(self.kubeconfig, self.context)
        except Exception as error:
            if isinstance(error, _kubeconfig_errors()):
                raise ClusterProblem(f"cannot use the kubeconfig: {_one_line(error)}") from None
            raise


def _kubeconfig_errors() -> tuple[type[Exception], ...]:
    """What reading a kubeconfig raises when the file or the context is not usable."""
    import yaml

    malformed = (ValueError, KeyError, TypeError, AttributeError)  # a file not shaped as one
    return (CredentialsError, yaml.YAMLError, OSError, *malformed)


def cluster_options(command: F) -> F:
    """--kubeconfig, --context and -n/--namespace, handed to the command as `target`."""

    @click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False),
        help="Kubeconfig file [default: $KUBECONFIG, else ~/.kube/config, else in-cluster].",
    )
    @click.option("--context", help="Kubeconfig context [default: its current context].")
    @click.option(
        "--namespace", "-n", help="Namespace [default: the context's namespace, else default]."
    )
    @functools.wraps(command)
    def wrapper(
        *args: Any, kubeconfig: str | None, context: str | None, namespace: str | None, **kw: Any
    ) -> Any:
        return command(*args, target=Target(kubeconfig, context, namespace), **kw)

    return wrapper  # type: ignore[return-value]


def on_cluster(
    target: Target,
    body: Callable[[JobsApi], Awaitable[T]],
    namespace: str | None = None,
) -> T:
    """Run `body` against the target's cluster; every failure becomes one line."""
    conn = target.connect()
    chosen = target.namespace or namespace or conn.namespace
    try:
        return asyncio.run(_with_api(conn, chosen, body))
    except JobDeleted as error:
        raise JobEnded(str(error)) from None
    except (NoSuchJob, AmbiguousJob) as error:
        raise BadInput(str(error)) from None
    except NoJobApi as error:
        raise ClusterProblem(str(error)) from None
    except TransportError as error:
        raise ClusterProblem(f"cannot reach the cluster at {conn.server}: {error}") from None
    except CredentialsError as error:
        raise ClusterProblem(f"cannot authenticate: {error}") from None
    except ApiError as error:
        raise ClusterProblem(f"the API server answered {error}") from None


async def _with_api(conn: Connection, namespace: str, body: Callable[[JobsApi], Awaitable[T]]) -> T:
    client = KubeClient.from_connection(conn)
    try:
        return await body(JobsApi(client, namespace))
    finally:
        await client.close()


# -- a job as the user names it -------------------------------------------------------


@dataclass(frozen=True)
class JobRef:
    """A job as named on the command line; no kind: whichever kind holds the name."""

    name: str
    kind: ClusterKind | None = None


def job_ref(words: tuple[str, ...]) -> JobRef:
    """`NAME`, `KIND NAME` or `KIND/NAME`, as kubectl takes them (`pytorchjob/train`,
    `pytorchjobs train`); BadInput otherwise."""
    if len(words) == 1 and "/" in words[0]:
        kind, _, name = words[0].partition("/")
        return JobRef(_name(name), parse_kind(kind))
    if len(words) == 1:
        return JobRef(_name(words[0]))
    if len(words) == 2:
        return JobRef(_name(words[1]), parse_kind(words[0]))
    raise BadInput(f"{' '.join(words)}: name one job, as NAME, KIND NAME or KIND/NAME")


def parse_kind(text: str) -> ClusterKind:
    """A kind as kubectl takes a resource type (`pytorchjob`, `pytorchjobs`,
    `PyTorchJob`, `pytorchjobs.kubeflow.org`, `trainjob`); BadInput naming the known
    ones."""
    kind = kind_named(text)
    if kind is None:
        known = ", ".join(k.kind.lower() for k in known_kinds())
        raise BadInput(f"{text!r} is not a kind of job: write one of {known} (or its plural)")
    return cluster_kind(kind)


def _name(text: str) -> str:
    if not text or "/" in text:
        raise BadInput(f"{text!r} is not a job name: write NAME, KIND NAME or KIND/NAME")
    return text


def outcome(job: Object) -> int:
    """Exit status for a finished job, as `tfjob run` gives it: 0 on its kind's
    success condition (Succeeded; a TrainJob's Complete), 1 with the reason else."""
    conditions = (job.get("status") or {}).get("conditions") or []
    typed = msgspec.convert(conditions, list[JobCondition], strict=False)
    name = str(job["metadata"].get("name", ""))
    return exit_status(name, typed, success=kind_of(job).success)


# -- durations, as kubectl's --timeout and --since take them ---------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """`90s`, `5m`, `1h30m`, `500ms` (Go's duration syntax, as kubectl); in seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        if text == "0":
            return 0.0
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            self.fail(f"{value!r} is not a duration: write e.g. 90s, 5m or 1h30m", param, ctx)
        return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def age(created: str | None, now: datetime) -> str:
    """How long ago, the way kubectl's AGE column says it (42s, 3m12s, 5h, 2d)."""
    if not created:
        return "<unknown>"
    seconds = max(int((now - parse_rfc3339(created)).total_seconds()), 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


def _one_line(error: BaseException) -> str:
    if isinstance(error, KeyError):
        return f"it has no {error} entry"
    if isinstance(error, (TypeError, AttributeError)):
        return f"it is not shaped as a kubeconfig ({error})"
    text = " ".join(str(error).split())
    return text or type(error).__name__
