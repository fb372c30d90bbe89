import cupy as cp
from skimage import data

from cucim.skimage.exposure import rescale_intensity
from cucim.skimage.morphology import reconstruction


image_host = data.moon()
image = cp.asarray(image_host)
image = rescale_intensity(image, in_range=(50, 200))

seed[1:-1, 1:-1] = image.max()
mask = image

filled = reconstruction(seed, mask, method='erosion')
