{{- define "vnw.name" -}}{{ default "veneer-node-watcher" .Values.nameOverride | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "vnw.fullname" -}}
{{- $name := include "vnw.name" . -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains $name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}{{- end -}}
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
{{- /*
The labels of the objects a Prometheus stack selects (ServiceMonitor, PrometheusRule, dashboard
ConfigMap): metrics.labels, which kube-prometheus-stack's `release` selector needs on all of them,
then the object's own labels over it. Call with (list $ .Values.metrics.<object>.labels).
*/ -}}
{{- define "vnw.monitoringLabels" -}}
{{- $ := index . 0 -}}
{{- $labels := merge (deepCopy (index . 1 | default dict)) (deepCopy ($.Values.metrics.labels | default dict)) -}}
{{ include "vnw.labels" $ }}
{{- with $labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
{{- /*
auto: rendered when the cluster serves the Prometheus operator's kind (helm template: only with
--api-versions), so an install without its CRDs does not fail and one with them needs no switch.
*/ -}}
{{- define "vnw.monitoringEnabled" -}}
{{- $ := index . 0 -}}
{{- $enabled := index . 1 -}}
{{- if eq (toString $enabled) "auto" -}}
{{- if $.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" (index . 2)) }}true{{ end -}}
{{- else if eq (toString $enabled) "true" -}}true
{{- end -}}
{{- end -}}
{{- /*
The ServiceAccount the pods run as: the chart's (serviceAccount.create), or one you made (an IRSA
role's, say), which must then be named: falling back to `default` would bind the watcher's rights
to every pod of the namespace that runs as it.
*/ -}}
{{- define "vnw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "vnw.fullname" .) .Values.serviceAccount.name }}
{{- else -}}{{ required "serviceAccount.name: with serviceAccount.create=false, name the ServiceAccount the pods run as" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}
{{- /*
The chart's own scrape identity: with secure metrics and neither authorization nor
bearerTokenFile given, the ServiceMonitor presents the token of <fullname>-metrics-scraper.
*/ -}}
{{- define "vnw.scraper" -}}
{{- $sm := .Values.metrics.serviceMonitor -}}
{{- if and .Values.nodeWatcher.metrics.secure (include "vnw.monitoringEnabled" (list . $sm.enabled "ServiceMonitor")) (not $sm.authorization) (not $sm.bearerTokenFile) -}}
{{ include "vnw.fullname" . }}-metrics-scraper
{{- end -}}
{{- end -}}
{{- define "vnw.image" -}}
{{- if .Values.image.digest -}}{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}
{{- define "vnw.certSecret" -}}{{ include "vnw.fullname" . }}-tls{{- end -}}
{{- define "vnw.servingCert" -}}{{ include "vnw.fullname" . }}-serving{{- end -}}
{{- define "vnw.issuerKind" -}}{{ default "Issuer" .Values.certManager.issuer.kind }}{{- end -}}
{{- define "vnw.issuerName" -}}{{ default (printf "%s-ca" (include "vnw.fullname" .)) .Values.certManager.issuer.name }}{{- end -}}
{{- /*
A CEL list of strings, as src/engine/guard.ts writes one: ['a', 'b'], each string in single quotes.
*/ -}}
{{- define "vnw.celList" -}}
[{{- range $i, $s := . -}}{{ if $i }}, {{ end }}'{{ $s | replace "\\" "\\\\" | replace "'" "\\'" }}'{{- end -}}]
{{- end -}}
{{- /* An alert's runbook: its section of the runbook page (metrics.prometheusRule.runbookURL), anchored by its name as GitHub anchors headings. */}}
{{- define "vnw.runbook" -}}
{{- $root := index . 0 -}}
{{ tpl $root.Values.metrics.prometheusRule.runbookURL $root }}#{{ index . 1 | lower }}
{{- end -}}
{{- /* The watcher's config file. The guard's identities are the policy's (guard.yaml), not the process's. */}}
{{- define "vnw.configFile" -}}
{{- $nodeWatcher := deepCopy .Values.nodeWatcher }}
{{- with $nodeWatcher.webhook }}{{- $_ := unset . "allowedUsers" }}{{- $_ := unset . "allowedGroups" }}{{- end }}
nodeWatcher:
  {{- toYaml $nodeWatcher | nindent 2 }}
{{- end -}}
{{- define "vnw.configMapName" -}}
{{ include "vnw.fullname" . | trunc 52 | trimSuffix "-" }}-{{ include "vnw.configFile" . | trim | sha256sum | trunc 10 }}
{{- end -}}
