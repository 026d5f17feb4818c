//! The storage of one column of a table: a plain `Vec`, or a [`Nullable`] column that keeps an optional value in the
//! bytes of the value itself.
//!
//! An `Option<i64>` takes 16 bytes and an `Option<u32>` 8: half of each is the tag and its padding. A request has 19
//! optional numbers and a step 13, so a [`Nullable`] column (the value's bytes, one value of the type standing for
//! "absent": [`NULL_I64`], [`NULL_U32`], NaN) holds a trace's requests and steps in about 60 % of the memory, which is
//! what a trace too large to load keeps while its tokens are streamed.

/// Absent `i64` in a sentinel column.
pub const NULL_I64: i64 = i64::MIN;
/// Absent `u32` in a sentinel column (also [`NO_STR`] for string ids).
pub const NULL_U32: u32 = u32::MAX;
/// Absent `f64` in a sentinel column.
pub const NULL_F64: f64 = f64::NAN;
/// Absent small count in a sentinel column (a verify step's drafts: at most 254).
pub const NULL_U8: u8 = u8::MAX;

/// `Some(v)` unless `v` is the `u8` sentinel.
#[inline]
pub fn opt_u8(v: u8) -> Option<u8> {
    (v != NULL_U8).then_some(v)
}

/// `Some(v)` unless `v` is the `i64` sentinel.
#[inline]
pub fn opt_i64(v: i64) -> Option<i64> {
    (v != NULL_I64).then_some(v)
}

/// `Some(v)` unless `v` is the `u32` sentinel.
#[inline]
pub fn opt_u32(v: u32) -> Option<u32> {
    (v != NULL_U32).then_some(v)
}

/// `Some(v)` unless `v` is NaN, the `f64` sentinel.
#[inline]
pub fn opt_f64(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

/// A number with one value set apart to stand for "absent".
pub trait Sentinel: Copy {
    /// The value that stands for "absent".
    const NULL: Self;
    /// `None` for [`Self::NULL`], else the value.
    fn known(self) -> Option<Self>;
}

impl Sentinel for i64 {
    const NULL: Self = NULL_I64;
    fn known(self) -> Option<Self> {
        opt_i64(self)
    }
}

impl Sentinel for u32 {
    const NULL: Self = NULL_U32;
    fn known(self) -> Option<Self> {
        opt_u32(self)
    }
}

impl Sentinel for f64 {
    const NULL: Self = f64::NAN;
    fn known(self) -> Option<Self> {
        opt_f64(self)
    }
}

/// A column of optional values held as the values alone, [`Sentinel::NULL`] where absent. The sentinel itself
/// cannot be stored as a value: `Some(i64::MIN)`, `Some(u32::MAX)` and `Some(NaN)` read back as `None`, which for a
/// time, a count or a rate is what they mean.
#[derive(Clone, PartialEq)]
pub struct Nullable<T>(Vec<T>);

impl<T> Default for Nullable<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T: Sentinel> Nullable<T> {
    /// The value of row `i`, `None` where absent. Panics when `i` is out of range, like slice indexing.
    #[inline]
    pub fn at(&self, i: usize) -> Option<T> {
        self.0[i].known()
    }

    /// The value of row `i`, `None` where absent or when there is no row `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        self.0.get(i).and_then(|v| v.known())
    }

    /// Sets the value of row `i`. Panics when `i` is out of range.
    #[inline]
    pub fn set(&mut self, i: usize, v: Option<T>) {
        self.0[i] = v.unwrap_or(T::NULL);
    }

    /// Replaces every known value `v` with `f(v)` (absent values stay absent).
    pub fn map_known(&mut self, mut f: impl FnMut(T) -> T) {
        for v in &mut self.0 {
            if let Some(k) = v.known() {
                *v = f(k);
            }
        }
    }

    /// Appends a row.
    #[inline]
    pub fn push(&mut self, v: Option<T>) {
        self.0.push(v.unwrap_or(T::NULL));
    }

    /// Rows in the column.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The rows' values in order, `None` where absent.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Option<T>> + ExactSizeIterator + Clone + '_ {
        self.0.iter().map(|v| v.known())
    }

    /// The values as an owned vector of options (for a library that takes one, as polars does).
    pub fn to_options(&self) -> Vec<Option<T>> {
        self.iter().collect()
    }
}

impl<T: Sentinel> FromIterator<Option<T>> for Nullable<T> {
    fn from_iter<I: IntoIterator<Item = Option<T>>>(iter: I) -> Self {
        Self(iter.into_iter().map(|v| v.unwrap_or(T::NULL)).collect())
    }
}

impl<T: Sentinel> From<Vec<Option<T>>> for Nullable<T> {
    fn from(v: Vec<Option<T>>) -> Self {
        v.into_iter().collect()
    }
}

impl<T: Sentinel + PartialEq, const N: usize> PartialEq<[Option<T>; N]> for Nullable<T> {
    fn eq(&self, other: &[Option<T>; N]) -> bool {
        self.iter().eq(other.iter().copied())
    }
}

impl<T: Sentinel + PartialEq> PartialEq<Vec<Option<T>>> for Nullable<T> {
    fn eq(&self, other: &Vec<Option<T>>) -> bool {
        self.iter().eq(other.iter().copied())
    }
}

impl<T: Sentinel + std::fmt::Debug> std::fmt::Debug for Nullable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// What a table's macro needs of a column, whatever its storage: a `Vec` of the row's field, or a [`Nullable`] of
/// an optional field.
pub trait Column<T>: Default {
    /// Appends a row.
    fn put(&mut self, v: T);
    /// The value of row `i`.
    fn value(&self, i: usize) -> T;
    /// Rows in the column.
    fn rows(&self) -> usize;
    /// Appends every row of `other`.
    fn append_column(&mut self, other: &Self);
    /// Makes room for `additional` more rows; false when it could not.
    fn reserve_rows(&mut self, additional: usize) -> bool;
    /// The column whose row `k` is row `order[k]` of this one.
    fn permuted(&self, order: &[u32]) -> Self;
    /// Bytes held by the rows.
    fn bytes(&self) -> usize;
    /// Keeps the rows `keep` says, in place.
    fn retain_rows(&mut self, keep: &[bool]);
}

/// Keeps the items of `v` that `keep` says, in place.
pub fn retain_by<T>(v: &mut Vec<T>, keep: &[bool]) {
    let mut i = 0;
    v.retain(|_| {
        i += 1;
        keep.get(i - 1).copied().unwrap_or(true)
    });
}

impl<T: Copy> Column<T> for Vec<T> {
    #[inline]
    fn put(&mut self, v: T) {
        self.push(v);
    }
    #[inline]
    fn value(&self, i: usize) -> T {
        self[i]
    }
    fn rows(&self) -> usize {
        self.len()
    }
    fn append_column(&mut self, other: &Self) {
        self.extend_from_slice(other);
    }
    fn reserve_rows(&mut self, additional: usize) -> bool {
        self.try_reserve(additional).is_ok()
    }
    fn permuted(&self, order: &[u32]) -> Self {
        order.iter().map(|&i| self[i as usize]).collect()
    }
    fn bytes(&self) -> usize {
        self.len() * std::mem::size_of::<T>()
    }
    fn retain_rows(&mut self, keep: &[bool]) {
        retain_by(self, keep);
    }
}

impl<T: Sentinel> Column<Option<T>> for Nullable<T> {
    #[inline]
    fn put(&mut self, v: Option<T>) {
        self.push(v);
    }
    #[inline]
    fn value(&self, i: usize) -> Option<T> {
        self.at(i)
    }
    fn rows(&self) -> usize {
        self.len()
    }
    fn append_column(&mut self, other: &Self) {
        self.0.extend_from_slice(&other.0);
    }
    fn reserve_rows(&mut self, additional: usize) -> bool {
        self.0.try_reserve(additional).is_ok()
    }
    fn permuted(&self, order: &[u32]) -> Self {
        Self(order.iter().map(|&i| self.0[i as usize]).collect())
    }
    fn bytes(&self) -> usize {
        self.0.len() * std::mem::size_of::<T>()
    }
    fn retain_rows(&mut self, keep: &[bool]) {
        retain_by(&mut self.0, keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nullable_column_reads_back_what_was_put_and_absent_as_none() {
        let mut c: Nullable<i64> = [Some(-3), None, Some(0)].into_iter().collect();
        c.push(Some(7));
        c.set(1, Some(5));
        c.set(2, None);
        assert_eq!(c.to_options(), vec![Some(-3), Some(5), None, Some(7)]);
        assert_eq!(c.at(3), Some(7));
        assert_eq!(c.bytes(), 4 * 8, "8 bytes a row, not the 16 of an Option<i64>");
        let p = c.permuted(&[3, 2]);
        assert_eq!(p.to_options(), vec![Some(7), None]);
        let mut r = c.clone();
        r.retain_rows(&[false, true, true, false]);
        assert_eq!(r.to_options(), vec![Some(5), None]);
        let f: Nullable<f64> = vec![Some(0.5), None].into();
        assert_eq!(f.iter().rev().collect::<Vec<_>>(), vec![None, Some(0.5)]);
        let u: Nullable<u32> = vec![Some(u32::MAX - 1), None].into();
        assert_eq!(u.iter().collect::<Vec<_>>(), vec![Some(u32::MAX - 1), None]);
    }
}
