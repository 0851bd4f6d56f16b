{{- /*
The `helm test` objects' labels: the release's, but a name of their own, so that nothing selecting
the watcher's pods (Service, PodDisruptionBudget, NetworkPolicy, topology spread) selects them.
*/ -}}
{{- define "vnw.testLabels" -}}
app.kubernetes.io/name: {{ include "vnw.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- /* A test hook's annotations: (list weight delete-policy). */ -}}
{{- define "vnw.testHook" -}}
helm.sh/hook: test
helm.sh/hook-weight: {{ index . 0 | quote }}
helm.sh/hook-delete-policy: {{ index . 1 }}
{{- end -}}
