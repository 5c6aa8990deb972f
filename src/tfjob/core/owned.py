"""The objects a job owns besides its pods and services, kept as its kind wants them.

Some kinds own more than replicas: an MPIJob its launcher's ServiceAccount, Role,
RoleBinding and the `<job>-config` ConfigMap; a PyTorchJob with
`elasticPolicy.metrics` a HorizontalPodAutoscaler. The kind declares the kinds of
objects (`KindDeclaration.owned_kinds`) and, per pass, the objects a running job
wants (`Framework.owned_objects`, from the job, its observed pods and the Settings);
this module compares them with the observed ones, as controller-runtime's `Owns()`
and a reconcile of them would:
- a wanted object that is not observed is created;
- one whose owned fields (`OwnedKind.owned_fields`) differ is updated: the observed
  object with those fields replaced (a field the API server filled in beyond what the
  job asked, a default, is no difference);
- an observed one the job no longer wants is deleted if its kind prunes;
- a suspended job's objects of kinds deleted when suspended are deleted.
Every wanted object gets the labels the runtime watches them by (the kind's
operator-name and the job-name), beside the kind's own. Pure.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tfjob.api.kinds import OwnedKind
from tfjob.api.observed import OwnedObject
from tfjob.core.objects import owned_manifests
from tfjob.core.plan import Action, CreateOwned, DeleteOwned, UpdateOwned

if TYPE_CHECKING:
    from tfjob.core.pass_state import Pass


def wanted_objects(state: Pass) -> list[tuple[OwnedKind, dict[str, Any]]]:
    """The objects the running job wants, each with its kind and the watched labels."""
    kinds = state.framework.owned_kinds
    if not kinds:
        return []
    return [
        (kind_of(kinds, manifest["apiVersion"], manifest["kind"]), manifest)
        for manifest in owned_manifests(state.job, state.pods, state.settings)
    ]


def sync_actions(state: Pass) -> list[Action]:
    """Create, update and (for pruning kinds) delete, to make the observed objects the
    wanted ones."""
    actions: list[Action] = []
    wanted = wanted_objects(state)
    for kind, manifest in wanted:
        observed = _observed(state, kind, manifest["metadata"]["name"])
        if observed is None:
            actions.append(CreateOwned(kind=kind, manifest=manifest))
        elif (updated := updated_object(kind, observed, manifest)) is not None:
            actions.append(UpdateOwned(kind=kind, manifest=updated))
    names = {(kind.kind, manifest["metadata"]["name"]) for kind, manifest in wanted}
    for obj in state.owned:
        kind = kind_of(state.framework.owned_kinds, obj.api_version, obj.kind)
        if kind.prune and (kind.kind, obj.metadata.name) not in names and _alive(obj):
            actions.append(DeleteOwned(kind=kind, name=obj.metadata.name))
    return actions


def suspend_actions(state: Pass) -> list[Action]:
    """A suspended job gives back its objects of the kinds deleted while suspended."""
    actions: list[Action] = []
    for obj in state.owned:
        kind = kind_of(state.framework.owned_kinds, obj.api_version, obj.kind)
        if kind.deleted_when_suspended and _alive(obj):
            actions.append(DeleteOwned(kind=kind, name=obj.metadata.name))
    return actions


def updated_object(
    kind: OwnedKind, observed: OwnedObject, wanted: dict[str, Any]
) -> dict[str, Any] | None:
    """The observed object with its owned fields (and the watched labels) replaced by
    the wanted ones, or None when they already cover what is wanted."""
    document = observed.document
    labels = document["metadata"].get("labels") or {}
    wanted_labels = wanted["metadata"].get("labels") or {}
    same = all(covers(document.get(f), wanted.get(f)) for f in kind.owned_fields)
    if same and all(labels.get(k) == v for k, v in wanted_labels.items()):
        return None
    updated = copy.deepcopy(document)
    updated["metadata"]["labels"] = {**labels, **wanted_labels}
    for field in kind.owned_fields:
        if field in wanted:
            updated[field] = copy.deepcopy(wanted[field])
        else:
            updated.pop(field, None)
    return updated


def covers(observed: Any, wanted: Any) -> bool:
    """Whether `observed` holds everything `wanted` says: a mapping each wanted key
    (recursively; keys the API server added, its defaults, are ignored), a list the
    same number of items each covering its own, anything else an equal value."""
    if isinstance(wanted, dict):
        return isinstance(observed, dict) and all(
            covers(observed.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(observed, list)
            and len(observed) == len(wanted)
            and all(covers(o, w) for o, w in zip(observed, wanted, strict=True))
        )
    if wanted is None:
        return True
    return bool(observed == wanted)


def kind_of(kinds: tuple[OwnedKind, ...], api_version: str, kind: str) -> OwnedKind:
    """The declared kind of an object by its apiVersion and kind."""
    for owned in kinds:
        if owned.kind == kind and owned.api_version == api_version:
            return owned
    raise KeyError(f"{api_version} {kind} is not a kind this job's kind owns")


def _observed(state: Pass, kind: OwnedKind, name: str) -> OwnedObject | None:
    for obj in state.owned:
        if obj.kind == kind.kind and obj.metadata.name == name:
            return obj
    return None


def _alive(obj: OwnedObject) -> bool:
    return obj.metadata.deletion_timestamp is None
