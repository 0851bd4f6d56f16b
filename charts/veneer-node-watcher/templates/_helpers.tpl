{{- define "vnw.name" -}}veneer-node-watcher{{- end -}}
{{- define "vnw.fullname" -}}
{{- if contains "veneer-node-watcher" .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-veneer-node-watcher" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- define "vnw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vnw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "vnw.labels" -}}
{{ include "vnw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- define "vnw.certSecret" -}}{{ include "vnw.fullname" . }}-tls{{- end -}}
{{- define "vnw.servingCert" -}}{{ include "vnw.fullname" . }}-serving{{- end -}}
{{- define "vnw.issuerKind" -}}{{ default "Issuer" .Values.certManager.issuer.kind }}{{- end -}}
{{- define "vnw.issuerName" -}}{{ default (printf "%s-ca" (include "vnw.fullname" .)) .Values.certManager.issuer.name }}{{- end -}}
