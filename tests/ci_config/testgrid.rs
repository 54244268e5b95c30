//! `testgrid/config.yaml`: its test groups, dashboards and tabs, and the check that every job
//! has its tabs (with the annotated names, alert addresses and thresholds) and every tab a job.
//! The structs follow GoogleCloudPlatform/testgrid `pb/config/config.proto` in its YAML form;
//! unknown fields are errors.

use super::*;

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestGridConfig {
    test_groups: Vec<TestGroup>,
    dashboards: Vec<Dashboard>,
    #[serde(default)]
    dashboard_groups: Vec<DashboardGroup>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestGroup {
    name: String,
    gcs_prefix: String,
    days_of_results: Option<u32>,
    num_columns_recent: Option<u32>,
    tests_name_policy: Option<String>,
    ignore_skip: Option<bool>,
    column_header: Option<Value>,
    test_name_config: Option<Value>,
    notifications: Option<Value>,
    // num_failures_to_alert, alert_stale_results_hours and alert_mail_to_addresses are
    // deprecated here in config.proto (they live in the tab's alert_options): not accepted.
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Dashboard {
    name: String,
    dashboard_tab: Vec<DashboardTab>,
    notifications: Option<Value>,
    default_tab: Option<String>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DashboardTab {
    name: String,
    test_group_name: String,
    description: Option<String>,
    base_options: Option<String>,
    num_columns_recent: Option<u32>,
    code_search_url_template: Option<LinkTemplate>,
    open_test_template: Option<LinkTemplate>,
    file_bug_template: Option<LinkTemplate>,
    results_url_template: Option<LinkTemplate>,
    alert_options: Option<AlertOptions>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkTemplate {
    url: String,
    options: Option<Value>,
    name: Option<String>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlertOptions {
    alert_mail_to_addresses: Option<String>,
    num_failures_to_alert: Option<u32>,
    alert_stale_results_hours: Option<u32>,
    num_passes_to_disable_alert: Option<u32>,
    subject: Option<String>,
    wait_minutes_between_emails: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DashboardGroup {
    name: String,
    dashboard_names: Vec<String>,
}

fn load_testgrid() -> TestGridConfig {
    let path = root().join("testgrid/config.yaml");
    serde_json::from_value(parse_one(&path))
        .unwrap_or_else(|e| panic!("testgrid/config.yaml is not a TestGrid config: {e}"))
}

#[test]
fn every_job_has_its_testgrid_tabs_and_every_tab_a_job() {
    let jobs = load_jobs();
    let tg = load_testgrid();
    let by_name: BTreeMap<&str, &LoadedJob> = jobs.iter().map(|j| (j.job.name.as_str(), j)).collect();
    let dashboards: BTreeMap<&str, &Dashboard> = tg.dashboards.iter().map(|d| (d.name.as_str(), d)).collect();
    assert_eq!(dashboards.len(), tg.dashboards.len(), "dashboard names must be unique");
    for required in ["sig-windows-master-release", "sig-windows-signal"] {
        assert!(dashboards.contains_key(required), "dashboard {required} is missing");
    }

    // Test groups: one per job, named like it, reading where prow uploads that job's results.
    let mut groups = BTreeMap::new();
    let mut buckets = BTreeSet::new();
    for g in &tg.test_groups {
        assert!(
            groups.insert(g.name.as_str(), g).is_none(),
            "test group {} is defined twice",
            g.name
        );
        let job = by_name
            .get(g.name.as_str())
            .unwrap_or_else(|| panic!("test group {} has no prow job of that name", g.name));
        let (bucket, path) = g
            .gcs_prefix
            .split_once('/')
            .unwrap_or_else(|| panic!("test group {}: gcs_prefix {} has no bucket", g.name, g.gcs_prefix));
        buckets.insert(bucket);
        let expected = match job.kind {
            JobType::Presubmit => format!("pr-logs/directory/{}", g.name),
            JobType::Periodic | JobType::Postsubmit => format!("logs/{}", g.name),
        };
        assert_eq!(path, expected, "test group {}: gcs_prefix {}", g.name, g.gcs_prefix);
        assert_eq!(
            g.num_columns_recent,
            Some(job.number_annotation("testgrid-num-columns-recent")),
            "test group {}: num_columns_recent must equal the job's testgrid-num-columns-recent",
            g.name
        );
    }
    assert_eq!(
        buckets.len(),
        1,
        "all test groups read the same bucket, found {buckets:?}"
    );

    // Jobs → tabs.
    for j in &jobs {
        let name = j.job.name.as_str();
        assert!(
            groups.contains_key(name),
            "job {name} has no test group in testgrid/config.yaml"
        );
        let listed = j.dashboards();
        assert!(!listed.is_empty(), "job {name}: testgrid-dashboards names no dashboard");
        let unique: BTreeSet<&String> = listed.iter().collect();
        assert_eq!(unique.len(), listed.len(), "job {name}: a dashboard is listed twice");
        let tab_name = j.annotation("testgrid-tab-name");
        let email = j.annotation("testgrid-alert-email");
        let failures = j.number_annotation("testgrid-num-failures-to-alert");
        let stale = j.optional_number_annotation("testgrid-alert-stale-results-hours");
        for (i, d) in listed.iter().enumerate() {
            let dashboard = dashboards
                .get(d.as_str())
                .unwrap_or_else(|| panic!("job {name}: dashboard {d} is not in testgrid/config.yaml"));
            let tabs: Vec<&DashboardTab> = dashboard
                .dashboard_tab
                .iter()
                .filter(|t| t.test_group_name == name)
                .collect();
            assert_eq!(
                tabs.len(),
                1,
                "job {name}: expected one tab on {d}, found {}",
                tabs.len()
            );
            let tab = tabs[0];
            assert_eq!(
                tab.name, tab_name,
                "job {name}: the tab on {d} must be named by testgrid-tab-name"
            );
            if let Some(desc) = j.job.annotations.get("description") {
                assert_eq!(
                    tab.description.as_deref(),
                    Some(desc.as_str()),
                    "job {name}: tab description on {d}"
                );
            }
            // Like the configurator: the alert address goes on the first dashboard's tab.
            if i == 0 {
                let alerts = tab
                    .alert_options
                    .as_ref()
                    .unwrap_or_else(|| panic!("job {name}: the tab on {d} (its first dashboard) has no alert_options"));
                assert_eq!(
                    alerts.alert_mail_to_addresses.as_deref(),
                    Some(email),
                    "job {name}: alert address on {d}"
                );
            }
            if let Some(alerts) = &tab.alert_options {
                if let Some(to) = &alerts.alert_mail_to_addresses {
                    assert_eq!(to, email, "job {name}: alert address on {d}");
                }
                assert_eq!(
                    alerts.num_failures_to_alert,
                    Some(failures),
                    "job {name}: num_failures_to_alert on {d}"
                );
                assert_eq!(
                    alerts.alert_stale_results_hours, stale,
                    "job {name}: alert_stale_results_hours on {d}"
                );
            }
        }
    }

    // Tabs → jobs: no tab for a job that does not ask for it, no duplicate tab names.
    for d in &tg.dashboards {
        let mut tab_names = BTreeSet::new();
        assert!(!d.dashboard_tab.is_empty(), "dashboard {} has no tab", d.name);
        for t in &d.dashboard_tab {
            assert!(
                tab_names.insert(t.name.as_str()),
                "dashboard {}: tab {} twice",
                d.name,
                t.name
            );
            let job = by_name.get(t.test_group_name.as_str()).unwrap_or_else(|| {
                panic!(
                    "dashboard {}: tab {} shows {}, which is no prow job",
                    d.name, t.name, t.test_group_name
                )
            });
            assert!(
                job.dashboards().contains(&d.name),
                "dashboard {}: tab {} but job {}'s testgrid-dashboards does not list {}",
                d.name,
                t.name,
                job.job.name,
                d.name
            );
            assert!(
                groups.contains_key(t.test_group_name.as_str()),
                "tab {} has no test group",
                t.name
            );
        }
    }
    for g in &tg.dashboard_groups {
        for d in &g.dashboard_names {
            assert!(
                dashboards.contains_key(d.as_str()),
                "dashboard group {}: no dashboard {d}",
                g.name
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The runner image.
