"""What a training job read and wrote, for Airflow assets and OpenLineage.

``assets`` builds the model asset's event extra, ``openlineage`` the OpenLineage datasets (S3
channels with their instance groups in, the model artifact out), and ``mixin`` gives the operator
and the sensor both, from the result dict of the job they watched.
"""
