"""One page of a multi-page file, an input of its own (`--pages each`; which pages, `plan.pages`):
the page read alone from its file (a TIFF's through tifffile, a DICOM's frame through pydicom:
the other pages are never decoded) and stored as the record of a one-page file holding that page
would be (`normalize.page_image`).

Why the page count is checked: the planner numbered the file's pages from its header; a file
that holds another number of pages now (rewritten since) would give pages that are not the ones
planned, some twice or none. Each of its pages is then a `pages_changed` reject.

The pages of a file sit together in one shard task (plan.planner.shard_tasks), so `RecentFiles`
keeps the last files read, with their hashes, for the pages after the first: a stack of 100
slices is read once, not 100 times.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

from beam_tfrecord import reasons
from beam_tfrecord.elements import Page
from beam_tfrecord.images import dicom, normalize, tiff
from beam_tfrecord.images.deep import PAGES_IN_FILE, DeepPicture
from beam_tfrecord.images.normalize import EncodedImage
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.reasons import Reject

__all__ = ["RecentFiles", "encode_page", "read_page"]


def encode_page(data: bytes, page: Page, options: ImageConfig, name: str | None = None) -> EncodedImage:
    """The stored image of page `page` of the file `data`, or `Reject`. `name`: the file's
    relative path (a wrong extension is a change, as for any file)."""
    return normalize.page_image(read_page(data, page, options), options, name)


def read_page(data: bytes, page: Page, options: ImageConfig) -> DeepPicture:
    """The page's samples as its reader gives them, [H, W, C], or `Reject`."""
    if not data:
        raise Reject(reasons.EMPTY, "the file has zero bytes")
    if dicom.is_dicom(data):
        picture = dicom.read_dicom(data, max_pixels=options.max_pixels, page=page.index)
    elif tiff.is_tiff(data):
        picture = tiff.read_tiff(data, max_pixels=options.max_pixels, page=page.index)
    else:
        raise Reject(
            reasons.PAGES_CHANGED,
            f"no longer a TIFF or DICOM, and {page.count} pages were counted in it: it changed since",
        )
    found = picture.facts.get(PAGES_IN_FILE)
    if found != page.count:
        raise Reject(
            reasons.PAGES_CHANGED,
            f"it holds {found} pages, and {page.count} were counted when the run was planned: "
            "it changed since",
        )
    return picture


class RecentFiles:
    """The last few files read for their pages, with their sha256, shared by the read threads of
    one shard task: the pages of a file follow each other there, and each would read and hash
    the whole file again. `keep` files at most are held (each within `--max_file_mb`)."""

    def __init__(self, keep: int = 2) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._files: OrderedDict[str, tuple[bytes, str]] = OrderedDict()

    def read(self, path: str, read: Callable[[], bytes]) -> tuple[bytes, str]:
        """(the file's bytes, their sha256): held ones, or `read()`'s, then held. Two threads
        that ask for one file at once may both read it: a wait would cost as much."""
        with self._lock:
            found = self._files.get(path)
            if found is not None:
                self._files.move_to_end(path)
                return found
        data = read()
        found = data, hashlib.sha256(data).hexdigest()
        with self._lock:
            self._files[path] = found
            while len(self._files) > self._keep:
                self._files.popitem(last=False)
        return found
