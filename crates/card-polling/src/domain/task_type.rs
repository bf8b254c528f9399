//! The configured polling task types (default `card_status`, `data_usage`, `package`), each with
//! its normal interval. A recoverable priority failure is rescheduled after that interval.

use std::time::Duration;

/// One task type and its normal polling interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskType {
    /// Name: 1–32 characters of `a-z`, `0-9`, `_`.
    pub name: String,
    /// Normal polling interval.
    pub interval: Duration,
}

/// The configured list; never empty, names unique.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTypes(Vec<TaskType>);

impl TaskTypes {
    /// Parses `name=seconds,name=seconds,…`.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut out: Vec<TaskType> = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, secs) = part
                .split_once('=')
                .ok_or_else(|| format!("task type {part:?}: expected name=seconds"))?;
            let name = name.trim();
            if name.is_empty()
                || name.len() > 32
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                return Err(format!("task type name {name:?}: use 1-32 of a-z 0-9 _"));
            }
            let secs: u64 = secs
                .trim()
                .parse()
                .ok()
                .filter(|s| (1..=86_400).contains(s))
                .ok_or_else(|| format!("task type {name}: interval must be 1..=86400 seconds"))?;
            if out.iter().any(|t| t.name == name) {
                return Err(format!("task type {name} listed twice"));
            }
            out.push(TaskType {
                name: name.to_owned(),
                interval: Duration::from_secs(secs),
            });
        }
        if out.is_empty() {
            return Err("at least one task type is required".into());
        }
        Ok(TaskTypes(out))
    }

    /// All task types in configured order.
    pub fn all(&self) -> &[TaskType] {
        &self.0
    }

    /// Names in configured order.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|t| t.name.clone()).collect()
    }

    /// The task type with this name.
    pub fn get(&self, name: &str) -> Option<&TaskType> {
        self.0.iter().find(|t| t.name == name)
    }
}

impl Default for TaskTypes {
    fn default() -> Self {
        TaskTypes::parse(DEFAULT_TASK_TYPES).expect("default task types parse")
    }
}

/// The default list: card status every 5 min, data usage every 10 min, package every 30 min.
pub const DEFAULT_TASK_TYPES: &str = "card_status=300,data_usage=600,package=1800";
