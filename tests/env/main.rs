//! Tests that need something from the machine: tmux (the console driven in
//! a real terminal), a real Slurm (munged, slurmctld, slurmd) and a real
//! Alertmanager and Prometheus. Where a
//! tool is missing, each of its tests is reported `ignored` with what to
//! install, never `ok`; under CI (`CI=true`, as `.ci/run` runs) a missing
//! tool is a failure.

mod alertmanager;
mod e2e_tmux;
mod image;
mod package;
mod prometheus;
mod prometheus_agents;
mod prometheus_amd_dashboard;
mod prometheus_dashboard;
mod prometheus_harness;
mod ray;
mod ray_harness;
mod slurm;
mod slurm_harness;
mod slurm_loop;

#[path = "../support/mod.rs"]
mod support;
pub use support::*;

use libtest_mimic::{Arguments, Failed, Trial};

/// A test that runs only where `missing` is `None`; otherwise it is listed
/// as ignored, with the reason as its kind.
fn trial(name: &str, test: fn(), missing: Option<&'static str>) -> Trial {
    let t = Trial::test(name, move || {
        std::panic::catch_unwind(test).map_err(|e| {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into());
            Failed::from(msg)
        })
    });
    match missing {
        Some(why) => t.with_kind(why).with_ignored_flag(true),
        None => t,
    }
}

fn main() {
    let args = Arguments::from_args();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let need = |ok: bool, why: &'static str| -> Option<&'static str> {
        assert!(
            ok || !ci,
            "CI must run every test, but {why} ({})",
            ".ci/run installs it"
        );
        (!ok).then_some(why)
    };
    let tmux = need(e2e_tmux::tmux_installed(), "needs tmux");
    let slurm = need(slurm_harness::installed(), "needs slurmctld slurmd slurm-client munge");
    let prometheus = need(
        prometheus_harness::installed(),
        "needs prometheus (/usr/bin/prometheus)",
    );
    let am = need(alertmanager::installed(), "needs prometheus-alertmanager");
    let victoria = need(
        prometheus_harness::victoria_installed(),
        "needs victoria-metrics (/usr/bin/victoria-metrics)",
    );
    let ray = need(
        ray_harness::installed() && e2e_tmux::tmux_installed(),
        "needs Ray in $FLEETOP_RAY_VENV (.ci/run makes it) and tmux",
    );
    let packages = need(
        package::installed(),
        "needs the packages (scripts/package.sh: cargo-deb) and dpkg, systemd-analyze",
    );
    let chroot = need(
        package::chroot_possible(),
        "needs the packages, root (chroot), openssl and systemd-sysusers",
    );
    let minbase = need(
        package::minbase_possible(),
        "needs the agent's package, root (chroot) and a minimal root in $FLEETOP_MINBASE (scripts/minbase.sh)",
    );
    let image = need(image::built(), "needs buildah and the agent's image (scripts/image.sh)");
    let real_nvml = need(
        image::built() && image::debian_nvml().is_some(),
        "needs the agent's image and Debian's libnvidia-ml1 in $FLEETOP_DEBIAN_NVML (scripts/debian-nvml.sh)",
    );
    // Each test is named by its path, as the built-in harness names them.
    macro_rules! t {
        ($f:path, $missing:expr) => {
            trial(stringify!($f), $f, $missing)
        };
    }
    let trials = vec![
        t!(
            prometheus_dashboard::nvidias_dashboard_queries_return_the_agents_data,
            prometheus
        ),
        t!(
            prometheus_amd_dashboard::amds_dashboard_queries_return_the_agents_data,
            prometheus
        ),
        t!(
            alertmanager::xid_and_thermal_alerts_arrive_grouped_and_resolve_when_the_faults_clear,
            am
        ),
        t!(
            alertmanager::alertmanager_down_at_start_gets_the_alerts_once_it_is_up,
            am
        ),
        t!(e2e_tmux::navigate_open_filter_quit_and_the_terminal_is_restored, tmux),
        t!(e2e_tmux::sigterm_and_sighup_restore_the_terminal_too, tmux),
        t!(e2e_tmux::burn_in_from_the_console_runs_on_the_demo_agents, tmux),
        t!(
            e2e_tmux::the_selection_stays_on_its_node_while_a_live_sort_moves_nodes,
            tmux
        ),
        t!(
            e2e_tmux::a_node_nobody_answers_is_connecting_then_an_unreachable_alert_with_why,
            tmux
        ),
        t!(e2e_tmux::a_new_crit_flag_rings_the_bell_unless_configured_off, tmux),
        t!(
            e2e_tmux::the_console_pages_through_alertmanager_while_it_runs,
            tmux.or(am)
        ),
        t!(slurm::discover_drain_resume_undrain_with_state_and_reason_shown, slurm),
        t!(slurm::text_format_reads_the_same_as_json, slurm),
        t!(
            slurm::a_hostile_reason_set_by_anyone_breaks_no_read_and_reaches_no_terminal,
            slurm
        ),
        t!(slurm::a_multi_node_drain_with_an_invalid_name_reports_each_node, slurm),
        t!(slurm::a_job_shows_on_its_node_and_a_drain_waits_for_it, slurm),
        t!(
            slurm::a_job_named_with_a_record_separator_or_a_het_job_breaks_no_text_read,
            slurm
        ),
        t!(slurm::read_only_refuses_and_logs_the_attempt, slurm),
        t!(slurm::job_cancel_scancels_a_real_job_and_read_only_refuses_it, slurm),
        t!(slurm::job_cancel_of_a_job_slurm_does_not_list_fails_in_one_line, slurm),
        t!(
            slurm::a_hung_then_dead_controller_is_shown_and_never_hangs_an_action,
            slurm
        ),
        t!(
            slurm_loop::return_resumes_only_the_nodes_that_pass_a_burn_in_since_their_drain,
            slurm
        ),
        t!(
            slurm_loop::a_node_missing_a_gpu_is_refused_then_fails_then_returns_once_repaired,
            slurm
        ),
        t!(
            slurm_loop::a_demo_burn_in_never_returns_a_real_node_and_a_pass_on_its_own_agent_does,
            slurm
        ),
        t!(
            slurm_loop::the_policy_drains_crit_nodes_after_grace_and_its_breaker_stops_a_fleet_wide_event,
            slurm
        ),
        t!(
            slurm_loop::two_watches_with_their_own_state_never_drain_past_the_limit_and_one_names_the_other,
            slurm
        ),
        t!(
            ray::ray_nodes_and_their_gpu_work_show_and_a_drain_goes_through_rays_gcs,
            ray
        ),
        t!(prometheus::prometheus_export_matches_the_exporters, prometheus),
        t!(prometheus::a_bad_match_is_prometheus_error_in_one_line, prometheus),
        t!(prometheus_agents::agent_flags_come_through_prometheus, prometheus),
        t!(prometheus_agents::agent_flags_come_through_victoria_metrics, victoria),
        t!(
            package::the_packages_install_their_files_and_each_units_exec_start_runs,
            packages
        ),
        t!(package::the_readmes_cluster_commands_run_as_written, chroot),
        t!(
            package::the_agents_package_installs_upgrades_removes_and_purges_with_apt_in_a_minimal_root,
            minbase
        ),
        t!(
            image::the_agents_image_runs_its_version_and_a_simulated_sample_and_holds_nothing_else,
            image
        ),
        t!(
            image::the_agents_image_loads_debians_libnvidia_ml_and_answers_driver_not_loaded,
            real_nvml
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}
