"""Ops of PyTorch's OpInfo database that onnxport refuses, each with the reason; ops that run no
case here, each with the reason; per-op tolerances.

``EXPECTED_UNSUPPORTED`` maps an OpInfo id to the reason it is refused (every dtype), or to
``(reason, dtypes)`` when only those dtypes are. tests/opinfo/test_opinfo.py fails when an op refused
is missing here, and when an op listed here exports right, so the list stays honest. ``NOT_RUN``
is kept honest the same way.
"""

FACTORIZATION = ("ONNX has no matrix factorization or decomposition (LU, QR, Cholesky, LDL, SVD, eigen) nor a solver "
                 "built on one")
SPECIAL_FUNCTION = "special function with no ONNX operator; not yet written from elementary operators"
POLYNOMIAL_RECURRENCE = ("orthogonal polynomial of a degree given as a tensor: PyTorch evaluates a recurrence of data-"
                         "dependent length")
DATA_DEPENDENT_VALUE = ("returns a Python bool or branches on tensor values: torch.export cannot capture it "
                        "(data-dependent output)")
DATA_DEPENDENT_SHAPE = ("output size depends on the data in a way torch.export cannot capture "
                        "(DynamicOutputShapeException)")
ONE_HOT_ANY_SIZE = "num_classes=-1 makes the output size max(input) + 1, which torch.export refuses to specialize"
RANDOM_WINDOWS = "random: fractional max pooling draws random window offsets ONNX has no form for"
RANDOM_SLOPES = "random: rrelu in training draws a slope per element that ONNX cannot reproduce"
NO_REPLACEMENT = "random: sampling without replacement has no ONNX form (ONNX Multinomial samples with replacement)"
SPARSE = "sparse tensors have no ONNX form"
IN_PLACE_RESIZE = "resizes a tensor in place (storage semantics): no ONNX form"
BACKWARD = "gradient of an op (a backward kernel): not an inference op"
HASH = "hashes the bits of a tensor: no ONNX form"
FLAT_STORAGE = "writes into flat storage positions of a tensor in place: not yet translated"
NOT_YET = "not yet translated (ONNX has the pieces: sorting, scatter, cumulative sums)"
BITS = "frexp / nextafter read float bits, which ONNX cannot bit-cast: not yet translated"
PRIVATE_CHUNKED = "torch.nn private op of a chunked cross entropy: not yet translated"
FLOAT_ONLY = ("int64 convolution / average pooling: ONNX Conv, ConvTranspose, AveragePool and LRN take float "
              "tensors only")

# OpInfo entries that only some of the supported torch releases have: torch 2.14 removed "cholesky" and "qr"
# (their linalg.* forms stay) and added "linalg.polar" and "linalg.matrix_sqrth". The lists below may name them
# where the installed op_db lacks them; tests/opinfo/test_opinfo.py checks every other name exists.
NOT_IN_EVERY_RELEASE = frozenset({"cholesky", "qr", "linalg.polar", "linalg.matrix_sqrth"})

EXPECTED_UNSUPPORTED: dict[str, str | tuple[str, tuple[str, ...]]] = {
    "cholesky": FACTORIZATION,
    "cholesky_inverse": FACTORIZATION,
    "cholesky_solve": FACTORIZATION,
    "geqrf": FACTORIZATION,
    "linalg.cholesky": FACTORIZATION,
    "linalg.cholesky_ex": FACTORIZATION,
    "linalg.cond": FACTORIZATION,
    "linalg.eig": FACTORIZATION,
    "linalg.eigh": FACTORIZATION,
    "linalg.eigvals": FACTORIZATION,
    "linalg.eigvalsh": FACTORIZATION,
    "linalg.householder_product": FACTORIZATION,
    "linalg.inv": FACTORIZATION,
    "linalg.inv_ex": FACTORIZATION,
    "linalg.ldl_factor": FACTORIZATION,
    "linalg.ldl_factor_ex": FACTORIZATION,
    "linalg.ldl_solve": FACTORIZATION,
    "linalg.lu": FACTORIZATION,
    "linalg.lu_factor": FACTORIZATION,
    "linalg.lu_factor_ex": FACTORIZATION,
    "linalg.lu_solve": FACTORIZATION,
    "linalg.matrix_rank": FACTORIZATION,
    "linalg.matrix_sqrth": FACTORIZATION,  # eigendecomposition; torch >= 2.14
    "linalg.matrix_rank.hermitian": FACTORIZATION,
    "linalg.pinv": FACTORIZATION,
    "linalg.pinv.hermitian": FACTORIZATION,
    "linalg.pinv.singular": FACTORIZATION,
    "linalg.polar": FACTORIZATION,  # through the SVD; torch >= 2.14
    "linalg.qr": FACTORIZATION,
    "linalg.solve": FACTORIZATION,
    "linalg.solve_ex": FACTORIZATION,
    "linalg.svd": FACTORIZATION,
    "linalg.svdvals": FACTORIZATION,
    "linalg.tensorinv": FACTORIZATION,
    "linalg.tensorsolve": FACTORIZATION,
    "lu": FACTORIZATION,
    "lu_solve": FACTORIZATION,
    "lu_unpack": FACTORIZATION,
    "matrix_exp": FACTORIZATION,
    "norm.nuc": FACTORIZATION,
    "ormqr": FACTORIZATION,
    "pca_lowrank": FACTORIZATION,
    "pinverse": FACTORIZATION,
    "qr": FACTORIZATION,
    "svd": FACTORIZATION,
    "svd_lowrank": FACTORIZATION,
    "triangular_solve": FACTORIZATION,
    "igamma": SPECIAL_FUNCTION,
    "igammac": SPECIAL_FUNCTION,
    "special.airy_ai": SPECIAL_FUNCTION,
    "special.chebyshev_polynomial_t": POLYNOMIAL_RECURRENCE,
    "special.chebyshev_polynomial_u": POLYNOMIAL_RECURRENCE,
    "special.chebyshev_polynomial_v": POLYNOMIAL_RECURRENCE,
    "special.chebyshev_polynomial_w": POLYNOMIAL_RECURRENCE,
    "special.hermite_polynomial_h": POLYNOMIAL_RECURRENCE,
    "special.hermite_polynomial_he": POLYNOMIAL_RECURRENCE,
    "special.laguerre_polynomial_l": POLYNOMIAL_RECURRENCE,
    "special.legendre_polynomial_p": POLYNOMIAL_RECURRENCE,
    "special.shifted_chebyshev_polynomial_t": POLYNOMIAL_RECURRENCE,
    "special.shifted_chebyshev_polynomial_u": POLYNOMIAL_RECURRENCE,
    "special.shifted_chebyshev_polynomial_v": POLYNOMIAL_RECURRENCE,
    "special.shifted_chebyshev_polynomial_w": POLYNOMIAL_RECURRENCE,
    "allclose": DATA_DEPENDENT_VALUE,
    "equal": DATA_DEPENDENT_VALUE,
    "corrcoef": DATA_DEPENDENT_VALUE,
    "cov": DATA_DEPENDENT_VALUE,
    "nn.functional.gaussian_nll_loss": DATA_DEPENDENT_VALUE,
    "linalg.lstsq": DATA_DEPENDENT_SHAPE,
    "linalg.lstsq.grad_oriented": DATA_DEPENDENT_SHAPE,
    "nn.functional.ctc_loss": DATA_DEPENDENT_SHAPE,
    "nn.functional.one_hot": ONE_HOT_ANY_SIZE,
    "nn.functional.fractional_max_pool2d": RANDOM_WINDOWS,
    "nn.functional.fractional_max_pool3d": RANDOM_WINDOWS,
    "nn.functional.rrelu": RANDOM_SLOPES,
    "multinomial": NO_REPLACEMENT,
    "to_sparse": SPARSE,
    "resize_as_": IN_PLACE_RESIZE,
    "max_pool2d_with_indices_backward": BACKWARD,
    "hash_tensor": HASH,
    "put": FLAT_STORAGE,
    "_segment_reduce.lengths": NOT_YET,
    "_segment_reduce.offsets": NOT_YET,
    "histogram": NOT_YET,
    "histogramdd": NOT_YET,
    "mode": NOT_YET,
    "frexp": BITS,
    "nextafter": BITS,
    "nn.functional.linear_cross_entropy.chunked": PRIVATE_CHUNKED,
    "nn.functional.linear_cross_entropy.chunked_none": PRIVATE_CHUNKED,
    "nn.functional.conv1d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.conv2d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.conv3d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.conv_transpose1d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.conv_transpose2d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.conv_transpose3d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.avg_pool1d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.avg_pool2d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.avg_pool3d": (FLOAT_ONLY, ("int64",)),
    "nn.functional.local_response_norm": (FLOAT_ONLY, ("int64",)),
}

# ops of op_db with float32 / int64 cases that run no case here, and why; tests/opinfo/test_opinfo.py
# fails when one of them runs, and when another op runs none (so a harness change cannot skip ops
# silently). Ops supporting neither float32 nor int64 (view_as_real, imag, istft, silu.complex,
# _scaled_mm, the fused attention kernels, batch_norm.without_cudnn: complex or CUDA dtypes only)
# have no case at all.
CUDA_ONLY = "jiterator ops compile CUDA kernels: eager PyTorch refuses them on CPU"
SPARSE_INPUT = "samples take sparse tensors, which have no ONNX form"
NOT_RUN: dict[str, str] = {
    "jiterator_unary": CUDA_ONLY,
    "jiterator_binary": CUDA_ONLY,
    "jiterator_4inputs_with_extra_args": CUDA_ONLY,
    "jiterator_binary_return_by_ref": CUDA_ONLY,
    "jiterator_2inputs_2outputs": CUDA_ONLY,
    "sparse.sampled_addmm": SPARSE_INPUT,
    "sparse.mm.reduce": SPARSE_INPUT,
}

# op id -> (atol, rtol) where float32 results differ from eager by more than the default tolerance
TOLERANCES: dict[str, tuple[float, float]] = {}
