// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Model-based test of files, GEM handle tables, mmap offsets and unplug: random operation
//! sequences run against the host core and against a plain reference model.

#![cfg(feature = "std")]

mod common;

use common::*;
use drm_ctx::{
    drm::{gem, ioctl, OpenOptions},
    host::Client,
    types::ARef,
    Error,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Open,
    Close(usize),
    CreateViaIoctl { file: usize, pages: u64 },
    CreateDirect { pages: usize },
    DropDirect(usize),
    HandleDirect { file: usize, obj: usize },
    GemClose { file: usize, handle: u32 },
    Lookup { file: usize, handle: u32 },
    MmapOffset { file: usize, handle: u32 },
    Mmap { file: usize, obj: usize },
    Unplug,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Open),
        1 => (0..4usize).prop_map(Op::Close),
        4 => (0..4usize, 1..4u64).prop_map(|(file, pages)| Op::CreateViaIoctl { file, pages }),
        2 => (1..4usize).prop_map(|pages| Op::CreateDirect { pages }),
        1 => (0..4usize).prop_map(Op::DropDirect),
        3 => (0..4usize, 0..6usize).prop_map(|(file, obj)| Op::HandleDirect { file, obj }),
        3 => (0..4usize, 0..6u32).prop_map(|(file, handle)| Op::GemClose { file, handle }),
        2 => (0..4usize, 0..6u32).prop_map(|(file, handle)| Op::Lookup { file, handle }),
        2 => (0..4usize, 0..6u32).prop_map(|(file, handle)| Op::MmapOffset { file, handle }),
        2 => (0..4usize, 0..12usize).prop_map(|(file, obj)| Op::Mmap { file, obj }),
        1 => Just(Op::Unplug),
    ]
}

/// The reference model: objects by id, per-file handle tables, external references.
#[derive(Default)]
struct Model {
    /// id -> (size, external refs, mmap offset)
    objects: BTreeMap<usize, (usize, usize, Option<u64>)>,
    next_id: usize,
    /// Open files: handle -> object id.
    files: Vec<BTreeMap<u32, usize>>,
    unplugged: bool,
    freed: usize,
}

impl Model {
    fn handle_count(&self, id: usize) -> usize {
        self.files
            .iter()
            .map(|f| f.values().filter(|v| **v == id).count())
            .sum()
    }

    fn new_object(&mut self, size: usize, ext: usize) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        self.objects.insert(id, (size, ext, None));
        id
    }

    fn collect(&mut self) {
        let dead: Vec<usize> = self
            .objects
            .iter()
            .filter(|(id, (_, ext, _))| *ext == 0 && self.handle_count(**id) == 0)
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            self.objects.remove(&id);
            self.freed += 1;
        }
    }

    fn insert_handle(&mut self, file: usize, id: usize) -> u32 {
        let table = &mut self.files[file];
        let h = (1..).find(|h| !table.contains_key(h)).unwrap();
        table.insert(h, id);
        h
    }
}

fn addr(o: &gem::Object<Bo>) -> usize {
    o as *const gem::Object<Bo> as usize
}

fn run(ops: Vec<Op>) {
    let (parent, reg, c) = registered();
    let dev = reg.device();
    let mut model = Model::default();
    let mut clients: Vec<Client<TestDriver>> = Vec::new();
    // Direct references: model id and the real object.
    let mut direct: Vec<(usize, ARef<gem::Object<Bo>>)> = Vec::new();
    // Object identity: model id -> address (valid while the object is alive).
    let mut addrs: BTreeMap<usize, usize> = BTreeMap::new();
    let id_of = |addrs: &BTreeMap<usize, usize>, o: &gem::Object<Bo>| {
        addrs
            .iter()
            .find(|(_, a)| **a == addr(o))
            .map(|(id, _)| *id)
            .expect("object unknown to the model")
    };

    for op in ops {
        match op {
            Op::Open => {
                if clients.len() < 4 {
                    let r = Client::open(dev, OpenOptions::render());
                    if model.unplugged {
                        assert_eq!(r.err(), Some(Error::NoDevice));
                    } else {
                        clients.push(r.unwrap());
                        model.files.push(BTreeMap::new());
                    }
                }
            }
            Op::Close(f) => {
                if f < clients.len() {
                    drop(clients.remove(f));
                    model.files.remove(f);
                }
            }
            Op::CreateViaIoctl { file, pages } => {
                if let Some(cl) = clients.get(file) {
                    let mut a = BoCreate {
                        size: pages * 4096 - 10,
                        ..Default::default()
                    };
                    let r = cl.ioctl_arg(BO_CREATE, &mut a);
                    if model.unplugged {
                        assert_eq!(r, Err(Error::NoDevice));
                    } else {
                        assert_eq!(r, Ok(0));
                        let id = model.new_object(pages as usize * 4096, 0);
                        assert_eq!(model.insert_handle(file, id), a.handle);
                        let o = gem::Object::<Bo>::lookup_handle(cl.file(), a.handle).unwrap();
                        addrs.insert(id, addr(&o));
                    }
                }
            }
            Op::CreateDirect { pages } => {
                let o = gem::Object::<Bo>::new(dev, pages * 4096, c.clone()).unwrap();
                let id = model.new_object(pages * 4096, 1);
                addrs.insert(id, addr(&o));
                direct.push((id, o));
            }
            Op::DropDirect(i) => {
                if i < direct.len() {
                    let (id, _) = direct.remove(i);
                    model.objects.get_mut(&id).unwrap().1 -= 1;
                }
            }
            Op::HandleDirect { file, obj } => {
                if let (Some(cl), Some((id, o))) = (clients.get(file), direct.get(obj)) {
                    let h = o.create_handle(cl.file()).unwrap();
                    assert_eq!(model.insert_handle(file, *id), h);
                }
            }
            Op::GemClose { file, handle } => {
                if let Some(cl) = clients.get(file) {
                    let mut a = ioctl::DrmGemClose { handle, pad: 0 };
                    let r = cl.ioctl_arg(ioctl::DRM_IOCTL_GEM_CLOSE, &mut a);
                    if model.unplugged {
                        assert_eq!(r, Err(Error::NoDevice));
                    } else if model.files[file].remove(&handle).is_some() {
                        assert_eq!(r, Ok(0));
                    } else {
                        assert_eq!(r, Err(Error::Invalid));
                    }
                }
            }
            Op::Lookup { file, handle } => {
                if let Some(cl) = clients.get(file) {
                    let r = gem::Object::<Bo>::lookup_handle(cl.file(), handle);
                    match model.files[file].get(&handle) {
                        Some(id) => {
                            let o = r.unwrap();
                            assert_eq!(id_of(&addrs, &o), *id);
                            assert_eq!(o.size(), model.objects[id].0);
                        }
                        None => assert_eq!(r.err(), Some(Error::NotFound)),
                    }
                }
            }
            Op::MmapOffset { file, handle } => {
                if let Some(cl) = clients.get(file) {
                    let mut a = BoMmapOffset {
                        handle,
                        ..Default::default()
                    };
                    let r = cl.ioctl_arg(BO_MMAP_OFFSET, &mut a);
                    if model.unplugged {
                        assert_eq!(r, Err(Error::NoDevice));
                    } else if let Some(id) = model.files[file].get(&handle) {
                        assert_eq!(r, Ok(0));
                        let slot = &mut model.objects.get_mut(id).unwrap().2;
                        match slot {
                            Some(off) => assert_eq!(*off, a.offset, "offsets are stable"),
                            None => *slot = Some(a.offset),
                        }
                    } else {
                        assert_eq!(r, Err(Error::NotFound));
                    }
                }
            }
            Op::Mmap { file, obj } => {
                let target = model
                    .objects
                    .iter()
                    .filter_map(|(id, (size, _, off))| off.map(|o| (*id, *size, o)))
                    .nth(obj);
                if let (Some(cl), Some((id, size, off))) = (clients.get(file), target) {
                    let r = cl.mmap(off, size);
                    if model.unplugged {
                        assert_eq!(r.err(), Some(Error::NoDevice));
                    } else if model.files[file].values().any(|v| *v == id) {
                        assert_eq!(id_of(&addrs, &r.unwrap()), id);
                    } else {
                        assert_eq!(r.err(), Some(Error::Access));
                    }
                }
            }
            Op::Unplug => {
                dev.unplug();
                model.unplugged = true;
            }
        }
        model.collect();
        addrs.retain(|id, _| model.objects.contains_key(id));

        // The real state matches the model.
        assert_eq!(Counters::get(&c.bo_drops), model.freed);
        assert_eq!(
            Counters::get(&c.bo_news),
            model.next_id + 2,
            "two firmware objects"
        );
        for (cl, table) in clients.iter().zip(&model.files) {
            assert_eq!(
                cl.file().handles(),
                table.keys().copied().collect::<Vec<_>>()
            );
        }
        for (id, o) in &direct {
            assert_eq!(o.handle_count(), model.handle_count(*id));
        }
        assert_eq!(
            Counters::get(&c.handle_opens) - Counters::get(&c.handle_closes),
            model.files.iter().map(|f| f.len()).sum::<usize>()
        );
        assert_eq!(Counters::get(&c.data_drops), 0);
    }

    let files = model.files.len();
    drop(clients);
    assert_eq!(
        Counters::get(&c.file_closes),
        Counters::get(&c.file_opens),
        "every file closed ({files} at the end)"
    );
    drop(direct);
    drop(reg);
    drop(parent);
    assert_eq!(Counters::get(&c.data_drops), 1);
    assert_eq!(Counters::get(&c.bo_drops), Counters::get(&c.bo_news));
    assert_eq!(
        Counters::get(&c.handle_opens),
        Counters::get(&c.handle_closes)
    );
}

proptest! {
    // Under Miri: few cases, and no failure file (Miri isolates the file system).
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: if cfg!(miri) {
            None
        } else {
            Some(Box::new(proptest::test_runner::FileFailurePersistence::default()))
        },
        ..ProptestConfig::default()
    })]

    #[test]
    fn handle_tables_and_files_match_the_model(
        ops in proptest::collection::vec(op(), 1..if cfg!(miri) { 24 } else { 60 })
    ) {
        run(ops);
    }
}
