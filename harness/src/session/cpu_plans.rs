//! The CPU engine's measured product plans kept between runs (see
//! `referee_workloads::cpu::planner`): a JSON file of the choices measured
//! on each machine, keyed by CPU model, kernel set and thread count. A run
//! reads it before building its model, the initialisation measures the
//! shapes it lacks (before `run_start`: outside the timed region), the file
//! gets them, and the run's provenance records every choice and where it
//! came from.
//!
//! A choice changes the speed only, never a result (every candidate gives
//! bitwise the same products), so the file is a cache: missing is the
//! normal first run, and an unreadable or malformed one only warns (the
//! products are measured again). It owns the file and its format; it does
//! not know how the planner measures.

use crate::session::error::SessionError;
use referee_workloads::cpu::Isa;
use referee_workloads::cpu::planner::{self, AttentionEntry, Entry, Mode, TrialRecord};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `measure` (the default) or `fixed` (the hand-chosen blocking, nothing
/// timed, no file).
pub const MODE_VAR: &str = "REFEREE_CPU_PLAN";
/// The file (default `$XDG_CACHE_HOME/referee/cpu-plans.json`, else
/// `~/.cache/referee/cpu-plans.json`); empty: no file (measured in every
/// process).
pub const FILE_VAR: &str = "REFEREE_CPU_PLAN_FILE";

const FORMAT: &str = "referee-cpu-plans/1";

/// How a session plans the CPU engine's products, resolved once.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuPlanSetting {
    pub mode: Mode,
    pub file: Option<PathBuf>,
}

impl Default for CpuPlanSetting {
    /// Nothing measured, no file (what a library caller gets).
    fn default() -> Self {
        Self {
            mode: Mode::Fixed,
            file: None,
        }
    }
}

impl CpuPlanSetting {
    /// From the environment's [`MODE_VAR`] and [`FILE_VAR`] (with `XDG_CACHE_HOME`
    /// and `HOME` for the default file).
    pub fn from_env() -> Result<Self, SessionError> {
        let var = |k: &str| std::env::var(k).ok();
        Self::resolve(
            var(MODE_VAR).as_deref(),
            var(FILE_VAR).as_deref(),
            var("XDG_CACHE_HOME").as_deref(),
            var("HOME").as_deref(),
        )
    }

    /// [`Self::from_env`] on given values.
    pub fn resolve(
        mode: Option<&str>,
        file: Option<&str>,
        xdg_cache: Option<&str>,
        home: Option<&str>,
    ) -> Result<Self, SessionError> {
        let mode = match mode.map(str::trim) {
            None | Some("") | Some("measure") => Mode::Measure,
            Some("fixed") => Mode::Fixed,
            Some(other) => {
                return Err(SessionError::CpuPlanMode {
                    given: other.to_string(),
                });
            }
        };
        let file = match file {
            Some(f) if f.trim().is_empty() => None,
            Some(f) => Some(PathBuf::from(f)),
            None => xdg_cache
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    home.filter(|h| !h.is_empty())
                        .map(|h| Path::new(h).join(".cache"))
                })
                .map(|d| d.join("referee").join("cpu-plans.json")),
        };
        Ok(Self {
            file: file.filter(|_| mode == Mode::Measure),
            mode,
        })
    }
}

/// Which machine a list of choices was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineKey {
    /// The CPU's model name, family, model and stepping (`/proc/cpuinfo`).
    pub cpu: String,
    /// The kernel set (`avx512`, `avx2`, `portable`).
    pub kernels: String,
    pub threads: usize,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlansFile {
    format: String,
    machines: Vec<Machine>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Machine {
    #[serde(flatten)]
    key: MachineKey,
    /// How many knobs the planner that measured these products had
    /// ([`planner::KNOBS`]; 0 in files from before this field): choices
    /// made without a later knob are measured again.
    #[serde(default)]
    knobs: usize,
    products: Vec<Entry>,
    /// How many knobs the attention's planner that chose these had
    /// ([`planner::ATTENTION_KNOBS`]; 0 in files from before this field):
    /// choices made without a later knob are measured again.
    #[serde(default)]
    attention_knobs: usize,
    /// Queries per block (and kernels) of each attention shape (none in
    /// files from before attention was planned: measured at first use).
    #[serde(default)]
    attention: Vec<AttentionEntry>,
}

/// One machine's choices: its products' blockings and its attentions' blocks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plans {
    pub products: Vec<Entry>,
    pub attention: Vec<AttentionEntry>,
}

/// Reads `path`'s choices for `key`: none where the file does not exist or
/// lists no such machine; no products (no attentions) where a planner with
/// other knobs made them (measured again, then saved over them); an error (naming the
/// file, line and column) where it cannot be read or parsed.
pub fn load(path: &Path, key: &MachineKey) -> Result<Plans, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Plans::default()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let file = parse(&text).map_err(|e| format!("{}:{e}", path.display()))?;
    Ok(file
        .machines
        .into_iter()
        .find(|m| m.key == *key)
        .map(|m| Plans {
            products: if m.knobs == planner::KNOBS {
                m.products
            } else {
                Vec::new()
            },
            attention: if m.attention_knobs == planner::ATTENTION_KNOBS {
                m.attention
            } else {
                Vec::new()
            },
        })
        .unwrap_or_default())
}

fn parse(text: &str) -> Result<PlansFile, String> {
    let f: PlansFile =
        serde_json::from_str(text).map_err(|e| format!("{}:{}: {e}", e.line(), e.column()))?;
    if f.format != FORMAT {
        return Err(format!("1:1: format {:?}, expected {FORMAT:?}", f.format));
    }
    // Blocks of nothing would stop the product (an edited file, say).
    for (i, m) in f.machines.iter().enumerate() {
        for (j, e) in m.products.iter().enumerate() {
            let b = e.blocking;
            if b.k_block == 0 || !(1..=64).contains(&b.blocks_per_thread) {
                return Err(format!(
                    " machines[{i}].products[{j}] ({}): expected k_block ≥ 1 and blocks_per_thread 1–64, found {} and {}",
                    e.shape, b.k_block, b.blocks_per_thread
                ));
            }
        }
        // Another block would change results, not only the speed (see
        // `planner::attention_blocks`): refused, not run.
        for (j, e) in m.attention.iter().enumerate() {
            let allowed = planner::attention_blocks(e.shape.t);
            if !allowed.contains(&e.block) {
                return Err(format!(
                    " machines[{i}].attention[{j}] ({}): expected a block of {allowed:?} queries, found {}",
                    e.shape, e.block
                ));
            }
        }
    }
    Ok(f)
}

/// Writes `plans` as `key`'s choices into `path` (other machines'
/// entries kept; a malformed file replaced), through a temporary file and a
/// rename, so that a reader never sees half a file.
pub fn save(path: &Path, key: &MachineKey, plans: Plans) -> Result<(), String> {
    let named = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut machines = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| parse(&t).ok())
        .map(|f| f.machines)
        .unwrap_or_default();
    machines.retain(|m| m.key != *key);
    machines.push(Machine {
        key: key.clone(),
        knobs: planner::KNOBS,
        attention_knobs: planner::ATTENTION_KNOBS,
        products: plans.products,
        attention: plans.attention,
    });
    let file = PlansFile {
        format: FORMAT.into(),
        machines,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(named)?;
    }
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, text + "\n").map_err(named)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        named(e)
    })
}

/// The CPU's name for [`MachineKey::cpu`], from `/proc/cpuinfo` text: the
/// model name with family, model and stepping (a virtual machine often
/// names only the vendor's line, "AMD EPYC").
pub fn cpu_name(cpuinfo: &str) -> String {
    let field = |k: &str| {
        cpuinfo.lines().find_map(|l| {
            let (a, b) = l.split_once(':')?;
            (a.trim() == k).then(|| b.trim().to_string())
        })
    };
    let model = Some(crate::system::probe::parse_cpuinfo(cpuinfo).0)
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "unknown CPU".into());
    match (field("cpu family"), field("model"), field("stepping")) {
        (Some(f), Some(m), Some(s)) => format!("{model} (family {f}, model {m}, stepping {s})"),
        _ => model,
    }
}

/// One run's use of the planner: what it read, what it measured, what it
/// wrote.
pub struct CpuPlanRun {
    setting: CpuPlanSetting,
    isa: Isa,
    key: MachineKey,
    loaded: Plans,
    /// Problems with the file (the run goes on: it only costs time).
    pub warnings: Vec<String>,
}

impl CpuPlanRun {
    /// Sets the planner's mode and gives it the file's choices for this
    /// machine (`isa` on `threads` threads of `cpu`).
    pub fn begin(setting: &CpuPlanSetting, isa: Isa, threads: usize, cpu: String) -> Self {
        planner::set_mode(setting.mode);
        let key = MachineKey {
            cpu,
            kernels: isa.name().to_string(),
            threads,
        };
        let mut warnings = Vec::new();
        let loaded = match &setting.file {
            Some(path) => load(path, &key).unwrap_or_else(|e| {
                warnings.push(format!("{e}; the CPU products are measured again"));
                Plans::default()
            }),
            None => Plans::default(),
        };
        planner::import(isa, threads, loaded.products.clone());
        planner::import_attention(isa, threads, loaded.attention.clone());
        Self {
            setting: setting.clone(),
            isa,
            key,
            loaded,
            warnings,
        }
    }

    /// After the initialisation: writes newly measured choices to the file
    /// and returns the provenance record of every choice in use.
    pub fn finish(&mut self) -> Value {
        let now = Plans {
            products: planner::export(self.isa, self.key.threads),
            attention: planner::export_attention(self.isa, self.key.threads),
        };
        let trials = planner::export_trials(self.isa, self.key.threads);
        let origin = |e: &Entry| {
            let trial = trials.iter().find(|r| r.before.shape == e.shape);
            product_origin(e, trial, &self.loaded.products)
        };
        let read_attention = |e: &AttentionEntry| self.loaded.attention.contains(e);
        let had_attention =
            |e: &AttentionEntry| self.loaded.attention.iter().any(|l| l.shape == e.shape);
        let measured = now.products.iter().any(|e| origin(e).save)
            || now.attention.iter().any(|e| !read_attention(e));
        if let (Some(path), true) = (&self.setting.file, measured)
            && let Err(e) = save(path, &self.key, now.clone())
        {
            self.warnings
                .push(format!("{e}; the measured CPU plans were not kept"));
        }
        let products: Vec<Value> = now
            .products
            .iter()
            .map(|e| {
                let mut p = serde_json::Map::new();
                p.insert("shape".into(), json!(e.shape.to_string()));
                let o = origin(e);
                p.insert("from".into(), json!(o.from));
                // The blocking's own fields (every knob, as the file has them).
                if let Value::Object(b) = json!(e.blocking) {
                    p.extend(b);
                }
                p.insert("time_vs_default".into(), json!(e.gain()));
                // What the trial in the step did: kept or changed the
                // choice, and its median there over the first choice's.
                p.insert("step".into(), json!(o.step));
                p.insert("time_in_step_vs_first".into(), json!(o.step_gain));
                Value::Object(p)
            })
            .collect();
        let attention: Vec<Value> = now
            .attention
            .iter()
            .map(|e| {
                json!({
                    "shape": e.shape.to_string(),
                    "from": from_label(read_attention(e), had_attention(e)),
                    "block": e.block,
                    "narrow": e.narrow,
                    "wide": e.wide,
                    "time_vs_default": e.gain(),
                })
            })
            .collect();
        json!({
            "mode": self.setting.mode,
            "file": self.setting.file.as_ref().map(|p| p.display().to_string()),
            "cpu": self.key.cpu,
            "kernels": self.key.kernels,
            "threads": self.key.threads,
            "products": products,
            "attention": attention,
            "warnings": self.warnings,
        })
    }
}

/// Where a choice came from: read from the file (`file`), measured again
/// where the file's choice of its shape lost its check, else measured.
fn from_label(read: bool, had: bool) -> &'static str {
    match (read, had) {
        (true, _) => "file",
        (false, true) => "measured again",
        (false, false) => "measured",
    }
}

/// One product's choice as the provenance and the file see it.
#[derive(Debug, PartialEq)]
struct Origin {
    /// [`from_label`] of the entry before the trial in the step.
    from: &'static str,
    /// What the trial did (`kept`, `changed`), where one ran.
    step: Option<&'static str>,
    /// The choice's median in the step over the first choice's.
    step_gain: Option<f64>,
    /// Whether the file must be written for it (measured, or moved).
    save: bool,
}

/// Where entry `e` came from, given the file's entries `loaded` and the
/// trial in the step that ran on its shape, if any. An entry read from the
/// file comes back as it was read (timings included): served, or timed
/// again and still the faster (`planner::recheck`), before the trial
/// (`planner::begin_trials`) may move its choice; one of a shape the file
/// had, but another before the trial, lost that check and was measured
/// again; anything else was measured by this run.
fn product_origin(e: &Entry, trial: Option<&TrialRecord>, loaded: &[Entry]) -> Origin {
    let before = trial.map_or(e, |r| &r.before);
    let read = loaded.contains(before);
    let had = loaded.iter().any(|l| l.shape == e.shape);
    let moved = trial.is_some_and(|r| r.changed());
    Origin {
        from: from_label(read, had),
        step: trial.map(|_| if moved { "changed" } else { "kept" }),
        step_gain: trial.and_then(|r| r.gain()),
        save: !read || moved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use referee_workloads::cpu::dense::{Blocking, Layout};
    use referee_workloads::cpu::planner::{Shape, Timing};

    fn entry(m: usize, k_block: usize) -> Entry {
        Entry {
            shape: Shape {
                m,
                n: 64,
                k: 512,
                a: Layout::Normal,
                b: Layout::Transposed,
            },
            blocking: Blocking {
                k_block,
                ..Blocking::default_for(Layout::Normal)
            },
            timings: vec![],
            in_step: vec![],
        }
    }

    /// A choice's origin is that of its entry before the trial in the step:
    /// a file's choice the trial moved is still from the file, and the move
    /// (like anything measured) makes the file be written.
    #[test]
    fn a_choice_moved_in_the_step_is_still_from_the_file() {
        let file = entry(2048, 256);
        let other = Entry {
            blocking: Blocking {
                k_block: 128,
                ..file.blocking
            },
            ..file.clone()
        };
        let timing = |e: &Entry, micros| Timing {
            blocking: e.blocking,
            micros,
        };
        let trial = |before: &Entry, chosen: &Entry| TrialRecord {
            before: before.clone(),
            medians: vec![timing(before, 100.0), timing(chosen, 90.0)],
            chosen: chosen.blocking,
        };
        let loaded = vec![file.clone()];
        let o = |e: &Entry, t: Option<&TrialRecord>| product_origin(e, t, &loaded);
        let origin = |from, step, step_gain, save| Origin {
            from,
            step,
            step_gain,
            save,
        };
        assert_eq!(o(&file, None), origin("file", None, None, false));
        let kept = trial(&file, &file);
        assert_eq!(
            o(&file, Some(&kept)),
            origin("file", Some("kept"), Some(1.0), false)
        );
        let moved = Entry {
            in_step: kept.medians.clone(),
            ..other.clone()
        };
        assert_eq!(
            o(&moved, Some(&trial(&file, &other))),
            origin("file", Some("changed"), Some(0.9), true)
        );
        // The file's choice lost its check: measured again (then tried).
        assert_eq!(
            o(&other, Some(&trial(&other, &other))),
            origin("measured again", Some("kept"), Some(1.0), true)
        );
        let new = entry(512, 256);
        assert_eq!(o(&new, None), origin("measured", None, None, true));
    }

    fn plans(products: Vec<Entry>) -> Plans {
        Plans {
            products,
            attention: vec![],
        }
    }

    fn key(threads: usize) -> MachineKey {
        MachineKey {
            cpu: "AMD EPYC (family 25, model 1, stepping 1)".into(),
            kernels: "avx2".into(),
            threads,
        }
    }

    #[test]
    fn the_setting_comes_from_the_environment() {
        let s = CpuPlanSetting::resolve(None, None, None, Some("/home/u")).unwrap();
        assert_eq!(s.mode, Mode::Measure);
        assert_eq!(
            s.file,
            Some(PathBuf::from("/home/u/.cache/referee/cpu-plans.json"))
        );
        let s = CpuPlanSetting::resolve(None, None, Some("/xdg"), Some("/home/u")).unwrap();
        assert_eq!(s.file, Some(PathBuf::from("/xdg/referee/cpu-plans.json")));
        let s = CpuPlanSetting::resolve(Some("measure"), Some("/p.json"), None, None).unwrap();
        assert_eq!(s.file, Some(PathBuf::from("/p.json")));
        // An empty file name: measured, not kept.
        let s = CpuPlanSetting::resolve(None, Some(""), Some("/xdg"), None).unwrap();
        assert_eq!((s.mode, s.file), (Mode::Measure, None));
        // fixed: nothing measured, no file.
        let s = CpuPlanSetting::resolve(Some("fixed"), Some("/p.json"), None, None).unwrap();
        assert_eq!((s.mode, s.file), (Mode::Fixed, None));
        let e = CpuPlanSetting::resolve(Some("fast"), None, None, None).unwrap_err();
        assert!(
            e.to_string().contains("REFEREE_CPU_PLAN=fast") && e.to_string().contains("measure"),
            "{e}"
        );
    }

    /// Each machine's choices are its own: saving one keeps the others, and
    /// loading finds only the exact CPU, kernel set and thread count.
    #[test]
    fn the_file_keeps_each_machine_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("cpu-plans.json");
        assert_eq!(load(&path, &key(2)).unwrap().products, vec![]);
        save(&path, &key(2), plans(vec![entry(2048, 256)])).unwrap();
        save(
            &path,
            &key(4),
            plans(vec![entry(2048, 512), entry(128, 128)]),
        )
        .unwrap();
        assert_eq!(
            load(&path, &key(2)).unwrap().products,
            vec![entry(2048, 256)]
        );
        assert_eq!(load(&path, &key(4)).unwrap().products.len(), 2);
        assert_eq!(load(&path, &key(8)).unwrap().products, vec![]);
        let other = MachineKey {
            kernels: "avx512".into(),
            ..key(2)
        };
        assert_eq!(load(&path, &other).unwrap().products, vec![]);
        // Saving a machine again replaces its list.
        save(&path, &key(2), plans(vec![entry(1024, 128)])).unwrap();
        assert_eq!(
            load(&path, &key(2)).unwrap().products,
            vec![entry(1024, 128)]
        );
        assert_eq!(load(&path, &key(4)).unwrap().products.len(), 2);
        // No temporary file left behind.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("cpu-plans.json")]);
    }

    #[test]
    fn a_malformed_file_is_an_error_naming_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cpu-plans.json");
        std::fs::write(
            &path,
            "{\n  \"format\": \"referee-cpu-plans/1\",\n  \"machines\": [1]\n}",
        )
        .unwrap();
        let e = load(&path, &key(2)).unwrap_err();
        assert!(e.starts_with(&format!("{}:3:", path.display())), "{e}");
        std::fs::write(&path, "{\"format\": \"other/2\", \"machines\": []}").unwrap();
        let e = load(&path, &key(2)).unwrap_err();
        assert!(e.contains("expected \"referee-cpu-plans/1\""), "{e}");
        // Blocks of nothing are refused, not run.
        let mut bad = entry(64, 512);
        bad.blocking.k_block = 0;
        save(&path, &key(2), plans(vec![entry(32, 256), bad])).unwrap();
        let e = load(&path, &key(2)).unwrap_err();
        assert!(
            e.contains("machines[0].products[1]") && e.contains("k_block ≥ 1"),
            "{e}"
        );
        // Saving over it replaces it with a good file.
        save(&path, &key(2), plans(vec![entry(64, 512)])).unwrap();
        assert_eq!(load(&path, &key(2)).unwrap().products, vec![entry(64, 512)]);
    }

    /// A file written before the later knobs (no `knobs`, `tile_rows`,
    /// `pack_b`, `split_columns` or `narrow`) reads, but its choices, made without
    /// those knobs, are not served: the products are measured again and
    /// saved over them. One
    /// written by a planner with other knobs than this one's is the same.
    #[test]
    fn choices_made_with_fewer_knobs_are_measured_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cpu-plans.json");
        save(&path, &key(2), plans(vec![entry(64, 256)])).unwrap();
        assert_eq!(load(&path, &key(2)).unwrap().products, vec![entry(64, 256)]);
        let rewrite = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            f(&mut doc);
            let text = serde_json::to_string_pretty(&doc).unwrap();
            std::fs::write(&path, &text).unwrap();
            text
        };
        fn drop_keys(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::Object(m) => {
                    for k in [
                        "knobs",
                        "attention_knobs",
                        "tile_rows",
                        "pack_b",
                        "split_columns",
                        "narrow",
                    ] {
                        m.remove(k);
                    }
                    m.values_mut().for_each(drop_keys);
                }
                serde_json::Value::Array(a) => a.iter_mut().for_each(drop_keys),
                _ => {}
            }
        }
        let old = rewrite(&drop_keys);
        assert!(
            !old.contains("knobs")
                && !old.contains("pack_b")
                && !old.contains("split_columns")
                && !old.contains("narrow")
                && old.contains("k_block"),
            "{old}"
        );
        assert_eq!(load(&path, &key(2)).unwrap().products, vec![]);
        // Saved again by this planner: served.
        save(&path, &key(2), plans(vec![entry(64, 512)])).unwrap();
        assert_eq!(load(&path, &key(2)).unwrap().products, vec![entry(64, 512)]);
        rewrite(&|d| d["machines"][0]["knobs"] = json!(planner::KNOBS + 1));
        assert_eq!(load(&path, &key(2)).unwrap().products, vec![]);
    }

    /// Attention blocks are kept with the products, survive a change of
    /// the products' knobs (they are not products), are absent from files
    /// written before them, are measured again where chosen without the
    /// kernels' knob, and a block that would change results (not a
    /// candidate of the planner's) is refused, naming the entry.
    #[test]
    fn attention_blocks_are_kept_and_checked() {
        use referee_workloads::cpu::planner::AttentionShape;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cpu-plans.json");
        let att = |t, block| AttentionEntry {
            shape: AttentionShape {
                t,
                heads: 4,
                dh: 32,
            },
            block,
            narrow: block == 128,
            wide: false,
            timings: vec![(16, 100.0), (block, 90.0)],
            narrow_timings: vec![],
            wide_timings: vec![],
        };
        let both = Plans {
            products: vec![entry(64, 256)],
            attention: vec![att(128, 32), att(100, 128)],
        };
        save(&path, &key(2), both.clone()).unwrap();
        assert_eq!(load(&path, &key(2)).unwrap(), both);
        let rewrite = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            f(&mut doc);
            std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        };
        // Products of a planner with other knobs are measured again; the
        // attention blocks are still served.
        rewrite(&|d| d["machines"][0]["knobs"] = json!(planner::KNOBS + 1));
        let got = load(&path, &key(2)).unwrap();
        assert_eq!(
            (got.products, got.attention),
            (vec![], both.attention.clone())
        );
        // A file from before attention was planned.
        save(&path, &key(2), both.clone()).unwrap();
        rewrite(&|d| {
            d["machines"][0]
                .as_object_mut()
                .unwrap()
                .remove("attention");
        });
        assert_eq!(load(&path, &key(2)).unwrap(), plans(both.products.clone()));
        // A file from before the attention's kernels were planned: its
        // blocks were chosen on the set's own kernels only.
        save(&path, &key(2), both.clone()).unwrap();
        rewrite(&|d| {
            let m = d["machines"][0].as_object_mut().unwrap();
            m.remove("attention_knobs");
            for e in m["attention"].as_array_mut().unwrap() {
                let e = e.as_object_mut().unwrap();
                e.remove("narrow");
                e.remove("narrow_timings");
            }
        });
        assert_eq!(load(&path, &key(2)).unwrap(), plans(both.products.clone()));
        // 8 queries per block would leave columns to the scalar tail on
        // AVX-512 (other bits); 256 is no candidate for 128 tokens.
        for bad in [8, 24, 256] {
            save(&path, &key(2), both.clone()).unwrap();
            rewrite(&|d| d["machines"][0]["attention"][1]["block"] = json!(bad));
            let e = load(&path, &key(2)).unwrap_err();
            assert!(
                e.contains("machines[0].attention[1]")
                    && e.contains(&format!("found {bad}"))
                    && e.contains("[16, 32, 64, 128]"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_cpu_name_has_family_model_and_stepping() {
        let info = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n";
        assert_eq!(cpu_name(info), "AMD EPYC (family 25, model 1, stepping 1)");
        assert_eq!(cpu_name("model name : X\n"), "X");
        assert_eq!(cpu_name(""), "unknown CPU");
    }
}
