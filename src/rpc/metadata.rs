//! [`Metadata`]: a call's keys and values, text or binary, a key as many
//! times as it is given.

use std::fmt;

use crate::proto::{metadata_entry::Value, MetadataEntry};

/// A call's metadata: keys with text or binary values, sent with the call
/// (and back, with the reply header and the status's trailers). A key may
/// hold several values, kept in the order they were added (as an HTTP
/// header or tonic's `MetadataMap` does). Keys are case-sensitive. A peer
/// may send at most 256 entries in each; past that the call fails with
/// `RESOURCE_EXHAUSTED`.
///
/// ```
/// use weft::rpc::Metadata;
///
/// let mut metadata = Metadata::new();
/// metadata.insert("tenant", "blue");
/// metadata.append("accept", "json");
/// metadata.append("accept", "proto");
/// metadata.insert_binary("trace-bin", [0x0a, 0x0b]);
///
/// assert_eq!(metadata.get("tenant"), Some("blue"));
/// assert_eq!(metadata.get_all("accept").collect::<Vec<_>>(), ["json", "proto"]);
/// assert_eq!(metadata.get_binary("trace-bin"), Some(&[0x0a, 0x0b][..]));
/// assert_eq!(metadata.len(), 4);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Kept as they travel: no copy on the way out or in.
    entries: Vec<MetadataEntry>,
}

/// One value of a [`Metadata`] entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataValue<'a> {
    /// Text.
    Text(&'a str),
    /// Bytes.
    Binary(&'a [u8]),
}

impl<'a> MetadataValue<'a> {
    /// The text, if it is text.
    pub fn as_text(self) -> Option<&'a str> {
        match self {
            MetadataValue::Text(text) => Some(text),
            MetadataValue::Binary(_) => None,
        }
    }

    /// The bytes, if they are binary.
    pub fn as_binary(self) -> Option<&'a [u8]> {
        match self {
            MetadataValue::Binary(bytes) => Some(bytes),
            MetadataValue::Text(_) => None,
        }
    }
}

fn value_of(entry: &MetadataEntry) -> MetadataValue<'_> {
    match &entry.value {
        Some(Value::Text(text)) => MetadataValue::Text(text),
        Some(Value::Binary(bytes)) => MetadataValue::Binary(bytes),
        // An entry with neither: an empty text, as a map's entry reads.
        None => MetadataValue::Text(""),
    }
}

impl Metadata {
    /// No entries.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries, each value of a repeated key counted.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sets `key` to the text `value`, in place of all its values.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.set(key.into(), Value::Text(value.into()));
    }

    /// Sets `key` to the bytes `value`, in place of all its values.
    pub fn insert_binary(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.set(key.into(), Value::Binary(value.into()));
    }

    /// Adds the text `value` to `key`'s values.
    pub fn append(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.entries.push(entry(key.into(), Value::Text(value.into())));
    }

    /// Adds the bytes `value` to `key`'s values.
    pub fn append_binary(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.entries.push(entry(key.into(), Value::Binary(value.into())));
    }

    fn set(&mut self, key: String, value: Value) {
        match self.entries.iter().position(|e| e.key == key) {
            Some(first) => {
                self.entries[first].value = Some(value);
                let mut at = 0;
                self.entries.retain(|e| {
                    at += 1;
                    at - 1 <= first || e.key != key
                });
            }
            None => self.entries.push(entry(key, value)),
        }
    }

    /// `key`'s first value, if it is text.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.first(key).and_then(MetadataValue::as_text)
    }

    /// `key`'s first value, if it is binary.
    pub fn get_binary(&self, key: &str) -> Option<&[u8]> {
        self.first(key).and_then(MetadataValue::as_binary)
    }

    fn first(&self, key: &str) -> Option<MetadataValue<'_>> {
        self.entries.iter().find(|e| e.key == key).map(value_of)
    }

    /// `key`'s text values, in order.
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.values(key).filter_map(MetadataValue::as_text)
    }

    /// `key`'s binary values, in order.
    pub fn get_all_binary<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.values(key).filter_map(MetadataValue::as_binary)
    }

    /// `key`'s values, text and binary, in order.
    pub fn values<'a>(&'a self, key: &'a str) -> impl Iterator<Item = MetadataValue<'a>> + 'a {
        self.entries.iter().filter(move |e| e.key == key).map(value_of)
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.iter().any(|e| e.key == key)
    }

    /// Removes all of `key`'s values: how many there were.
    pub fn remove(&mut self, key: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|e| e.key != key);
        before - self.entries.len()
    }

    /// Every entry, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, MetadataValue<'_>)> {
        self.entries.iter().map(|e| (e.key.as_str(), value_of(e)))
    }

    /// The entries as they travel.
    pub(crate) fn into_entries(self) -> Vec<MetadataEntry> {
        self.entries
    }

    /// Entries as they came.
    pub(crate) fn from_entries(entries: Vec<MetadataEntry>) -> Self {
        Self { entries }
    }
}

fn entry(key: String, value: Value) -> MetadataEntry {
    MetadataEntry {
        key,
        value: Some(value),
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Metadata {
    /// Text entries, each appended.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut metadata = Self::new();
        metadata.extend(iter);
        metadata
    }
}

impl<K: Into<String>, V: Into<String>> Extend<(K, V)> for Metadata {
    /// Text entries, each appended.
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (key, value) in iter {
            self.append(key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn insert_replaces_every_value_of_its_key_where_the_first_was() {
        let mut metadata: Metadata = [("a", "1"), ("b", "2"), ("a", "3")].into_iter().collect();
        metadata.insert("a", "4");
        assert_eq!(
            metadata.iter().collect::<Vec<_>>(),
            [("a", MetadataValue::Text("4")), ("b", MetadataValue::Text("2"))]
        );
        metadata.insert_binary("b", vec![0, 255]);
        assert_eq!(metadata.get("b"), None, "binary now");
        assert_eq!(metadata.get_binary("b"), Some(&[0, 255][..]));
        assert_eq!(metadata.remove("a"), 1);
        assert_eq!(metadata.remove("a"), 0);
        assert_eq!(metadata.len(), 1);
    }

    #[test]
    fn text_entries_read_as_a_string_map_reads_them_and_binary_survives() {
        // What a peer that reads the field as map<string, string> sees.
        #[derive(Clone, PartialEq, Message)]
        struct AsMap {
            #[prost(map = "string, string", tag = "3")]
            metadata: std::collections::HashMap<String, String>,
        }
        let mut metadata = Metadata::new();
        metadata.insert("k", "v");
        metadata.append_binary("raw-bin", vec![0xff, 0x00]);
        let header = crate::proto::CallHeader {
            method: "s/m".into(),
            timeout_micros: 0,
            metadata: metadata.clone().into_entries(),
            ..Default::default()
        };
        let bytes = header.encode_to_vec();
        let as_map = AsMap::decode(&bytes[..]).unwrap();
        assert_eq!(as_map.metadata.get("k").map(String::as_str), Some("v"));
        let back = crate::proto::CallHeader::decode(&bytes[..]).unwrap();
        assert_eq!(Metadata::from_entries(back.metadata), metadata);
        // And a map's bytes read as text entries.
        let from_map = AsMap {
            metadata: [("x".to_owned(), "y".to_owned())].into(),
        };
        let read = crate::proto::CallHeader::decode(&from_map.encode_to_vec()[..]).unwrap();
        assert_eq!(Metadata::from_entries(read.metadata).get("x"), Some("y"));
    }
}
