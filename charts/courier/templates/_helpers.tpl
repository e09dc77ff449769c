{{/* The chart name, or nameOverride. */}}
{{- define "courier.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object names: fullnameOverride, else the release name when it already contains the chart name
(release "courier" -> "courier"), else "<release>-<name>". At most 63 characters. */}}
{{- define "courier.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "courier.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "courier.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select the controller's pods (immutable in a Deployment: name and instance only). */}}
{{- define "courier.selector" -}}
app.kubernetes.io/name: {{ include "courier.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The standard labels of every object. Called with (list $ "component"). */}}
{{- define "courier.labels" -}}
{{- $ := index . 0 -}}
{{ include "courier.selector" $ }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/part-of: courier
app.kubernetes.io/managed-by: {{ $.Release.Service }}
helm.sh/chart: {{ include "courier.chart" $ }}
{{- end -}}

{{/* The controller image: repository@digest when a digest is set, else repository:tag (the tag
defaults to the chart's appVersion). */}}
{{- define "courier.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The Service Prometheus scrapes; its name is the `job` label of every Courier series. */}}
{{- define "courier.metricsService" -}}
{{- printf "%s-metrics" (include "courier.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}
