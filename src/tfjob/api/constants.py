"""Names and values fixed by the kubeflow.org/v1 API and upstream's labels.

They are part of the wire contract with kubectl, Kubeflow's SDK and existing pods, so
they live in one place and are never spelled out elsewhere. Labels, condition types,
policies and the replica types several kinds have are every kind's. A kind's own
names and defaults are in its framework (tfjob.frameworks.<kind>); the two of TFJob's
still here (CONTROLLER_NAME, DEFAULT_CONTAINER_NAME) are read outside its framework.
"""

from typing import Final

GROUP: Final = "kubeflow.org"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

CONTROLLER_NAME: Final = "tfjob-controller"
# The namespace of a job that names none and is given none on the command line.
DEFAULT_NAMESPACE: Final = "default"
MANAGED_BY_OPERATOR: Final = "kubeflow.org/training-operator"
MANAGED_BY_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES: Final = (MANAGED_BY_MULTIKUEUE, MANAGED_BY_OPERATOR)

DEFAULT_CONTAINER_NAME: Final = "tensorflow"
EXIT_CODE_UNKNOWN: Final = 0xBEEF  # used when the tensorflow container never terminated

LABEL_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME: Final = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
LABEL_JOB_ROLE: Final = "training.kubeflow.org/job-role"
JOB_ROLE_MASTER: Final = "master"

# The replica types more than one kind has, in canonical case.
MASTER: Final = "Master"
WORKER: Final = "Worker"

RESTART_POLICIES: Final = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES: Final = ("All", "Running", "None")

# Condition types of a job's status.
CREATED: Final = "Created"
RUNNING: Final = "Running"
RESTARTING: Final = "Restarting"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
SUSPENDED: Final = "Suspended"

MAX_NAME_LENGTH: Final = 63
