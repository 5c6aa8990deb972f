"""What the cluster commands (`tfjob submit/get/logs/wait/delete`) read and follow:
jobs by kind, their pods, Events and logs. Not part of the operator."""
