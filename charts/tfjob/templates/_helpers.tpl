{{/* The labels every object carries, as manifests/base sets them. */}}
{{- define "tfjob.labels" -}}
app.kubernetes.io/name: tfjob
app.kubernetes.io/component: operator
{{- end }}

{{/* Every kind the operator can serve, in the order of manifests/base. */}}
{{- define "tfjob.allKinds" -}}
TFJob PyTorchJob JAXJob XGBoostJob PaddleJob MPIJob
{{- end }}

{{/* The kinds served (values.schema.json allows only allKinds). */}}
{{- define "tfjob.kinds" -}}
{{- join " " .Values.kinds }}
{{- end }}

{{/* The operator's image reference: repository:tag, the tag defaulting to appVersion. */}}
{{- define "tfjob.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* ClusterRole, or Role in namespaced mode. */}}
{{- define "tfjob.roleKind" -}}
{{ if .Values.namespaced }}Role{{ else }}ClusterRole{{ end }}
{{- end }}
