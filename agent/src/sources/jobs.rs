//! Which Slurm job a process belongs to, from its cgroup path.
//!
//! slurmd puts each job's processes in a cgroup whose path names the job:
//! cgroup v1 `.../slurm/uid_1000/job_4411/step_0` and cgroup v2
//! `.../slurmstepd.scope/job_4411/step_0/user/task_0`.

use std::path::Path;

/// The Slurm job id in the text of a `/proc/<pid>/cgroup` file, if any.
pub fn job_id_from_cgroup(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|line| line.rsplit_once(':').map(|(_, path)| path))
        .flat_map(|path| path.split('/'))
        .find_map(|seg| seg.strip_prefix("job_").and_then(|id| id.parse().ok()))
}

/// The Slurm job id of a running process, reading `<proc_root>/<pid>/cgroup`.
/// `None` when the process has none or is gone.
pub fn job_id_of_pid(proc_root: &Path, pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
    job_id_from_cgroup(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_v2_layout() {
        let t = "0::/system.slice/slurmstepd.scope/job_4411/step_0/user/task_0\n";
        assert_eq!(job_id_from_cgroup(t), Some(4411));
    }

    #[test]
    fn cgroup_v1_layout() {
        let t = "12:pids:/user.slice\n\
                 11:devices:/slurm/uid_1000/job_97/step_batch/task_0\n\
                 1:name=systemd:/user.slice/user-1000.slice\n";
        assert_eq!(job_id_from_cgroup(t), Some(97));
    }

    #[test]
    fn no_job() {
        assert_eq!(
            job_id_from_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n"),
            None
        );
        assert_eq!(job_id_from_cgroup("0::/job_x/\n"), None);
        assert_eq!(job_id_from_cgroup(""), None);
    }

    #[test]
    fn reads_proc_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("42")).expect("mkdir");
        std::fs::write(dir.path().join("42/cgroup"), "0::/slurmstepd.scope/job_7/step_0\n").expect("write");
        assert_eq!(job_id_of_pid(dir.path(), 42), Some(7));
        assert_eq!(job_id_of_pid(dir.path(), 43), None);
    }
}
