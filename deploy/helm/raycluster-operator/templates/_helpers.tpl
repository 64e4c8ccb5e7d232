{{/*
Names and labels. Hand-written; the RBAC rules are in _rules.tpl (generated).
*/}}

{{/* The full name: fullnameOverride, else the release name (suffixed with the chart's unless
it holds it). Cluster-scoped objects (ClusterRoles) carry it, so two releases need two names. */}}
{{- define "raycluster-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "raycluster-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "raycluster-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* What selects the operator's pods: stable across upgrades (a Deployment's selector is
immutable). */}}
{{- define "raycluster-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "raycluster-operator.labels" -}}
{{ include "raycluster-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The watched namespaces as a JSON list: watchNamespace, else the release namespace for a
singleNamespaceInstall, else none (every namespace, a ClusterRole). */}}
{{- define "raycluster-operator.watched" -}}
{{- if .Values.watchNamespace -}}
{{- .Values.watchNamespace | uniq | toJson -}}
{{- else if .Values.singleNamespaceInstall -}}
{{- list .Release.Namespace | toJson -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/* Combinations the schema cannot say clearly: refused with what to change. */}}
{{- define "raycluster-operator.validate" -}}
{{- if and .Values.singleNamespaceInstall .Values.lifecycle.hostLossFailover.enabled -}}
{{- fail "singleNamespaceInstall=true creates no cluster-scoped object, but host-loss failover watches Nodes, which are cluster-scoped: also set lifecycle.hostLossFailover.enabled=false (Kubernetes' eviction then decides), or install with singleNamespaceInstall=false and watchNamespace (one ClusterRole, list/watch nodes)" -}}
{{- end -}}
{{- if and (not .Values.leaderElectionEnabled) (gt (int .Values.replicas) 1) -}}
{{- fail (printf "leaderElectionEnabled=false with replicas=%d: without leader election every replica would reconcile the same RayClusters; set replicas=1 or leaderElectionEnabled=true" (int .Values.replicas)) -}}
{{- end -}}
{{- end -}}
