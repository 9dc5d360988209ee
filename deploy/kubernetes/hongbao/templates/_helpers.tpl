{{/* The name of every object: the release's, with the chart's. */}}
{{- define "hongbao.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hongbao.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (api or scheduler). */}}
{{- define "hongbao.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The config file, from the values; refuses a password in a URL. */}}
{{- define "hongbao.config" -}}
{{- range $k, $v := dict "redis.url" .Values.redis.url "ledger.dsn" .Values.ledger.dsn -}}
{{- if regexMatch "^[a-z]+://[^/@]*:[^/@]*@" $v -}}
{{- fail (printf "%s holds a password: it would sit in a ConfigMap; use a passfile in the Secret" $k) -}}
{{- end -}}
{{- end -}}
{{- $dir := "/run/secrets/hongbao" -}}
{{- $cfg := omit (deepCopy .Values.config) "serve" "settle" -}}
{{- $_ := set $cfg "redis" .Values.redis.url -}}
{{- $_ := set $cfg "ledger" .Values.ledger.dsn -}}
{{- with .Values.secret.redisPassword }}{{ $_ := set $cfg "redis-password-file" (printf "%s/%s" $dir .) }}{{ end -}}
{{- $serve := deepCopy (.Values.config.serve | default dict) -}}
{{- $_ := set $serve "listen" (printf "0.0.0.0:%v" .Values.service.port) -}}
{{- $_ := set $serve "metrics-listen" (printf "0.0.0.0:%v" .Values.service.metricsPort) -}}
{{- $_ := set $serve "settle" false -}}
{{- $_ := set $serve "data-dir" "/var/lib/hongbao" -}}
{{- with .Values.secret.adminKey }}{{ $_ := set $serve "admin-key-file" (printf "%s/%s" $dir .) }}{{ end -}}
{{- with .Values.secret.tokenSecret }}{{ $_ := set $serve "token-secret-file" (printf "%s/%s" $dir .) }}{{ end -}}
{{- with .Values.secret.paymentKey }}{{ $_ := set $serve "payment-key-file" (printf "%s/%s" $dir .) }}{{ end -}}
{{- with .Values.secret.receiptKey }}{{ $_ := set $serve "receipt-key-file" (printf "%s/%s" $dir .) }}{{ end -}}
{{- $_ := set $cfg "serve" $serve -}}
{{- $settle := deepCopy (.Values.config.settle | default dict) -}}
{{- $_ := set $settle "metrics-listen" (printf "0.0.0.0:%v" .Values.service.metricsPort) -}}
{{- $_ := set $cfg "settle" $settle -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The pod's security: a numeric non-root user, nothing to escalate. */}}
{{- define "hongbao.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "hongbao.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The volumes of both deployments: the config file and the secrets. */}}
{{- define "hongbao.volumes" -}}
- name: config
  configMap:
    name: {{ include "hongbao.fullname" . }}
- name: secrets
  secret:
    secretName: {{ .Values.secret.name }}
    defaultMode: 0440
- name: data
  emptyDir: {}
{{- end -}}

{{- define "hongbao.volumeMounts" -}}
- name: config
  mountPath: /etc/hongbao
  readOnly: true
- name: secrets
  mountPath: /run/secrets/hongbao
  readOnly: true
- name: data
  mountPath: /var/lib/hongbao
{{- end -}}

{{/* A disruption budget: maxUnavailable when given, else minAvailable
(a PodDisruptionBudget takes one of them). */}}
{{- define "hongbao.budget" -}}
{{- if hasKey . "maxUnavailable" | and .maxUnavailable -}}
maxUnavailable: {{ .maxUnavailable }}
{{- else -}}
minAvailable: {{ .minAvailable }}
{{- end -}}
{{- end -}}
