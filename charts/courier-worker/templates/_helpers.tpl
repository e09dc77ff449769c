{{- define "courier-worker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Names of the cluster-scoped objects: fullnameOverride, else the release name when it already
contains the chart name (release "courier-worker" -> "courier-worker"), else
"<release>-courier-worker". Two releases on one worker (one per management cluster) get their
own ClusterRole, binding and admission policy. */}}
{{- define "courier-worker.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "courier-worker.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "courier-worker.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The standard labels of every object. Called with (list $ "component"). */}}
{{- define "courier-worker.labels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "courier-worker.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/part-of: courier
app.kubernetes.io/managed-by: {{ $.Release.Service }}
helm.sh/chart: {{ include "courier-worker.chart" $ }}
{{- end -}}

{{/* The ValidatingAdmissionPolicy and its binding. */}}
{{- define "courier-worker.policyName" -}}
{{- printf "%s-mirror-ownership" (include "courier-worker.fullname" . | trunc 46 | trimSuffix "-") -}}
{{- end -}}

{{- define "courier-worker.username" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.serviceAccount }}
{{- end -}}
