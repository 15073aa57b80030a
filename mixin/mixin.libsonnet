// The Helios mixin (monitoring-mixins layout): prometheusAlerts, prometheusRules,
// grafanaDashboards and the _config they read. README.md beside this file.
(import 'config.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ (import 'rules/rules.libsonnet')
+ (import 'rules/dcgm.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
