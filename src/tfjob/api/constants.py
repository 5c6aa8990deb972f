"""Names and values fixed by the kubeflow.org/v1 API and upstream's labels.

They are part of the wire contract with kubectl, Kubeflow's SDK and existing pods, so
they live in one place and are never spelled out elsewhere. Labels, condition types
and policies are every kind's; the kind's names and defaults here (KIND, PLURAL,
CONTROLLER_NAME, DEFAULT_*, the replica types) are TFJob's, which its framework
(tfjob.frameworks.tensorflow) declares; another kind declares its own in its file.
"""

from typing import Final

GROUP: Final = "kubeflow.org"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "TFJob"
PLURAL: Final = "tfjobs"

CONTROLLER_NAME: Final = "tfjob-controller"
# The namespace of a job that names none and is given none on the command line.
DEFAULT_NAMESPACE: Final = "default"
MANAGED_BY_OPERATOR: Final = "kubeflow.org/training-operator"
MANAGED_BY_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES: Final = (MANAGED_BY_MULTIKUEUE, MANAGED_BY_OPERATOR)

DEFAULT_CONTAINER_NAME: Final = "tensorflow"
DEFAULT_PORT_NAME: Final = "tfjob-port"
DEFAULT_PORT: Final = 2222
DEFAULT_RESTART_POLICY: Final = "Never"
EXIT_CODE_UNKNOWN: Final = 0xBEEF  # used when the tensorflow container never terminated

LABEL_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME: Final = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
LABEL_JOB_ROLE: Final = "training.kubeflow.org/job-role"
JOB_ROLE_MASTER: Final = "master"

# Canonical replica types, in the order upstream evaluates status.
CHIEF: Final = "Chief"
EVALUATOR: Final = "Evaluator"
MASTER: Final = "Master"
PS: Final = "PS"
WORKER: Final = "Worker"
REPLICA_TYPES: Final = (CHIEF, EVALUATOR, MASTER, PS, WORKER)

RESTART_POLICIES: Final = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES: Final = ("All", "Running", "None")
SUCCESS_POLICIES: Final = ("", "AllWorkers")

# Condition types of a job's status.
CREATED: Final = "Created"
RUNNING: Final = "Running"
RESTARTING: Final = "Restarting"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
SUSPENDED: Final = "Suspended"

MAX_NAME_LENGTH: Final = 63
